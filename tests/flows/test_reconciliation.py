"""Reconciliation end to end against the emulator: a payout run reconciles when it ends and again when one of
its payouts changes later; every difference kind; a daily close that balances to the cent, and one that
does not. The platform's own actions come from the emulator's admin hooks (sandbox/README.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from openpyxl import load_workbook
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.flows.reconcile import ReconcileDayParams, ReconcileRunParams, reconcile_day, reconcile_run
from payops.sandbox import SandboxConfig, SandboxServer, create_app
from payops.store import PayopsSettings, migrate, upgrade_database
from payops.store.approvals import state_policy
from payops.store.reconciliation import ReconciliationStore
from payops.tasks.ledger.daily_close import business_day

from tests.flows.approval_support import payops_db
from tests.flows.support import payroll_rows, serve_in_thread, write_sheet

pytestmark = pytest.mark.e2e
ADMIN = "/_sandbox/businesses/demo/test"


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


def _use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tmp_path: Path) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PAYOPS_DATABASE_URL", f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    with payops_db() as engine:
        state_policy(engine, "none")  # these runs are not about approval: their database says so


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SandboxServer:
    _use(monkeypatch, server.env, tmp_path)
    return server


def admin(base: str, path: str, body: dict | None = None) -> dict:
    r = httpx.post(f"{base}{ADMIN}/{path}", json=body, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def pay(tmp_path: Path, label: str, rows: list[list[str]]) -> dict:
    sheet = write_sheet(tmp_path / f"{label}.xlsx", rows)
    params = PayoutRunParams(
        source=str(sheet), label=label, report_dir=str(tmp_path / "reports"), poll_deadline_s=60
    )
    return run_summary(asyncio.run(payout_spreadsheet(params, return_state=True)))


def reconcile(**params) -> dict:
    return run_summary(asyncio.run(reconcile_run(ReconcileRunParams(**params), return_state=True))).as_json()


def close(tmp_path: Path) -> dict:
    params = ReconcileDayParams.model_validate(
        {"date": business_day(datetime.now(UTC)).isoformat(), "report_dir": str(tmp_path / "closes")}
    )
    return run_summary(asyncio.run(reconcile_day(params, return_state=True))).as_json()


def checks(label: str) -> list:
    engine = upgrade_database(PayopsSettings.from_env())
    try:
        migrate(engine)
        return ReconciliationStore(engine).checks("run", label)
    finally:
        engine.dispose()


def test_a_run_reconciles_clean_and_a_late_refund_reopens_it(prefect_harness, env, tmp_path: Path) -> None:
    s = pay(tmp_path, "rec-clean", payroll_rows(3, prefix="RC"))
    assert s["outcome"] == "completed" and s["payouts_by_status"] == {"delivered": 3}
    assert s["reconciliation"]["status"] == "clean" and s["reconciliation"]["matched"] == 3
    summary_sheet = dict(
        load_workbook(s["report_files"]["xlsx"])["summary"].iter_rows(min_row=2, values_only=True)
    )
    assert summary_sheet["Reconciliation"] == "clean"

    admin(env.base_url, "payouts/RC-00001/refund")  # weeks later, the provider returns the money
    again = reconcile(reference="RC-00001")  # what the webhook / events catch-up trigger passes
    assert again["label"] == "rec-clean" and again["status"] == "differences"
    assert again["by_kind"] == {"reversed_after_delivery": 1}
    (diff,) = again["differences_list"]
    assert diff["reference"] == "RC-00001" and "rvr-RC-00001" in diff["detail"]
    assert [c.status for c in checks("rec-clean")] == ["differences", "clean"]  # history, newest first
    assert [c.trigger for c in checks("rec-clean")] == ["event", "run-end"]

    unrelated = reconcile(reference="not-a-payops-payout")
    assert unrelated["status"] == "not_a_payops_run"


def test_every_difference_kind_of_a_run(prefect_harness, env, tmp_path: Path) -> None:
    s = pay(tmp_path, "rec-kinds", payroll_rows(5, prefix="RK"))
    assert s["reconciliation"]["status"] == "clean"
    base = env.base_url
    admin(base, "payouts/RK-00000/reconciliation", {"status": "mismatched"})
    admin(base, "payouts/RK-00001/adjust", {"fee": "19.99"})  # far outside the quoted 0.50
    admin(base, "payouts/RK-00002/adjust", {"amount": "9.00"})
    admin(base, "payouts/RK-00003/reconciliation", {"status": "unchecked"})
    admin(base, "movements", {"kind": "payout", "reference": "rec-kinds-r999", "amount": "25.00"})
    got = reconcile(label="rec-kinds", unchecked_after_hours=0)
    assert got["by_kind"] == {
        "amount_different": 1,
        "fee_outside_bound": 1,
        "not_sent_by_payops": 1,
        "platform_mismatched": 1,
        "unchecked_too_long": 1,
    }
    by_kind = {d["kind"]: d for d in got["differences_list"]}
    assert (
        by_kind["fee_outside_bound"]["expected"] == "0.50..0.50"
        and by_kind["fee_outside_bound"]["actual"] == "19.99"
    )
    assert (
        by_kind["amount_different"]["expected"] == "12.50" and by_kind["amount_different"]["actual"] == "9.00"
    )
    assert by_kind["not_sent_by_payops"]["reference"] == "rec-kinds-r999"
    assert got["matched"] == 1  # RK-00004 only


class RefuseBatches:
    """The service answers every batch with 400: the run fails before any payout exists."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/payout-batches":
            body = b'{"error":{"code":"invalid_input","message":"items: refused by the test"}}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def test_rows_a_failed_run_never_sent_are_missing_at_the_service(
    prefect_harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with serve_in_thread(RefuseBatches(create_app(SandboxConfig(delivery_delay_s=0.3)))) as base:
        _use(
            monkeypatch,
            {
                "PAYOPS_BASE_URL": base,
                "PAYOPS_AUTH_URL": f"{base}/auth",
                "PAYOPS_CLIENT_ID": "demo-test-client",
                "PAYOPS_CLIENT_SECRET": "demo-test-secret",
                "PAYOPS_RESOURCE": "urn:payments-api",
            },
            tmp_path,
        )
        sheet = write_sheet(tmp_path / "lost.xlsx", payroll_rows(2, prefix="RM"))
        params = PayoutRunParams(source=str(sheet), label="rec-lost", report_dir=str(tmp_path / "r"))
        state = asyncio.run(payout_spreadsheet(params, return_state=True))
        assert state.is_failed()
        got = reconcile(label="rec-lost")
        assert got["by_kind"] == {"missing_at_service": 2} and got["matched"] == 0


async def _other_movements(days_client: PaymentsClient) -> None:
    await days_client.collections.create(
        reference="day-c1",
        amount="40.00",
        currency="GHS",
        provider="mtn",
        payer={"type": "msisdn", "value": "0245552220"},
    )
    await days_client.transfers.create(
        reference="day-t1", handle="acme-traders", amount="7.25", currency="GHS"
    )
    await days_client.utilities.purchase(
        reference="day-u1",
        product_id="mtn-airtime",
        amount="5.00",
        currency="GHS",
        beneficiary={"msisdn": "233245553330"},
        funding={"type": "wallet"},
    )


def clean_effects(summary: dict) -> dict[str, str]:
    """Wallet effect by reference, from the close's JSON report."""
    import json

    data = json.loads(Path(summary["report_files"]["json"]).read_text())
    return {t["reference"]: t["wallet effect"] for t in data["transactions"]}


def test_daily_close_balances_to_the_cent_then_finds_what_does_not(
    prefect_harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as day:
        _use(monkeypatch, day.env, tmp_path)
        first = close(tmp_path)
        assert first["status"] == "baseline" and first["differences"] == 0

        s = pay(tmp_path, "rec-day", payroll_rows(3, prefix="RD", specials={2: "0002"}))  # one fails
        assert s["reconciliation"]["status"] == "clean"

        async def move() -> None:
            async with PaymentsClient(PaymentsSettings()) as c:
                await _other_movements(c)

        asyncio.run(move())
        time.sleep(1.5)  # every movement final
        clean = close(tmp_path)
        assert clean["status"] == "balanced" and clean["differences"] == 0, clean["differences_list"]
        ghs = clean["balances"]["GHS"]
        assert ghs["unexplained"] == "0.00" and ghs["change"] == ghs["movements"]
        # two delivered payouts with their fees (10.50 + 11.50 + 2 x 0.50); the failed one moved nothing
        effects = {r: Decimal(v) for r, v in clean_effects(clean).items()}
        assert effects["RD-00000"] + effects["RD-00001"] == Decimal("-23.00") and effects["RD-00002"] == 0
        assert effects["day-c1"] == Decimal("39.40") and effects["day-t1"] == Decimal("-7.25")
        assert (
            clean["outside_payops"] == 3
        )  # the collection, the transfer, the purchase: payops paid the rest
        wb = load_workbook(clean["report_files"]["xlsx"])
        assert {"transactions", "summary", "differences", "attribution", "wallet"} <= set(wb.sheetnames)
        sheet = wb["transactions"]
        head = [c.value for c in sheet[1]]
        runs = {
            sheet.cell(r, head.index("reference") + 1).value: sheet.cell(r, head.index("run") + 1).value
            for r in range(2, sheet.max_row + 1)
        }
        assert runs["RD-00000"] == "rec-day" and runs["day-c1"] == "outside payops"
        amounts = [sheet.cell(r, head.index("wallet effect") + 1).value for r in range(2, sheet.max_row + 1)]
        assert all(isinstance(a, int | float) for a in amounts)
        assert sum(Decimal(str(a)) for a in amounts) == Decimal(ghs["movements"])
        wallet = wb["wallet"]
        whead = [c.value for c in wallet[1]]
        balance = wallet.cell(2, whead.index("balance") + 1).value
        # a number finance can sum, not text (issue 47)
        assert isinstance(balance, int | float) and Decimal(str(balance)) == Decimal(ghs["balance"])

        admin(day.base_url, "payouts/RD-00000/refund")
        admin(day.base_url, "movements", {"kind": "payout", "reference": "dash-9", "amount": "3.00"})
        httpx.post(f"{day.base_url}{ADMIN}/wallet/fund", json={"amount": "100.00"}, timeout=10)  # no line
        later = close(tmp_path)
        assert later["status"] == "differences"
        assert later["by_kind"] == {"balance_unexplained": 1, "reversed_after_delivery": 1}
        assert later["balances"]["GHS"]["unexplained"] == "100.00"
        assert later["runs_touched"] == ["rec-day"]
