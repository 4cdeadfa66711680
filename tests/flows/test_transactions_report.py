"""`transactions-report` against the emulator: totals match what the test itself moved, all pages read."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.connectors.payments._slices import FANOUT
from payops.flows.transactions import TransactionsReportParams, transactions_report
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.ledger.transactions_report import previous_day

pytestmark = pytest.mark.e2e

PAYOUTS = [
    ("tr-p1", "10.00", "0245551110"),
    ("tr-p2", "250.50", "0245551111"),
    ("tr-p3", "3.25", "0245550002"),
]
COLLECTIONS = [("tr-c1", "40.00", "0245552220"), ("tr-c2", "19.99", "0245550009")]  # 0009: mismatched
PURCHASES = [("tr-u1", "mtn-airtime", "5.00", "0245553330"), ("tr-u2", "mtn-data-1gb", "10.00", "0245553331")]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    return server


async def move_money() -> dict[str, dict[str, Decimal]]:
    """Payouts, collections and purchases; returns the expected amount sums per kind/direction."""
    expected: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    async with PaymentsClient(PaymentsSettings()) as c:
        for ref, amount, msisdn in PAYOUTS:
            dest = {"type": "msisdn", "value": msisdn}
            await c.payouts.create(
                reference=ref, amount=amount, currency="GHS", provider="mtn", destination=dest
            )
            expected["payout/out"]["GHS"] += Decimal(amount)
        for ref, amount, msisdn in COLLECTIONS:
            payer = {"type": "msisdn", "value": msisdn}
            await c.collections.create(
                reference=ref, amount=amount, currency="GHS", provider="mtn", payer=payer
            )
            expected["collection/in"]["GHS"] += Decimal(amount)
        for ref, product, amount, msisdn in PURCHASES:
            await c.utilities.purchase(
                reference=ref,
                product_id=product,
                amount=amount,
                currency="GHS",
                beneficiary={"msisdn": "233" + msisdn[1:]},
                funding={"type": "wallet"},
            )
            expected["utility/out"]["GHS"] += Decimal(amount)
    return expected


def test_report_totals_match_the_money_moved(prefect_harness, env, tmp_path: Path) -> None:
    start = datetime.now(UTC) - timedelta(seconds=1)
    expected = asyncio.run(move_money())
    time.sleep(1.0)  # everything reaches a final status (delivery delay 0.3 s)
    params = TransactionsReportParams(
        **{"from": start},
        to=datetime.now(UTC) + timedelta(minutes=1),
        page_size=3,
        report_dir=str(tmp_path / "reports"),
    )
    s = asyncio.run(transactions_report(params))
    assert s["outcome"] == "completed" and s["transactions"] == 7
    # 7 items in pages of 3 (so 3 requests at least), read in slices: a cut's wrong guess (the 7 came in one
    # burst) costs at most FANOUT - 1 requests more
    assert 3 <= s["api_calls"]["GET /v1/transactions"] <= 3 + 2 * (FANOUT - 1)
    got = {k: {c: Decimal(v) for c, v in cur.items()} for k, cur in s["totals_by_kind_direction"].items()}
    assert got == {k: dict(v) for k, v in expected.items()}
    assert s["by_kind"]["payout"]["count"] == 3 and s["by_kind"]["payout"]["amount"] == {"GHS": "263.75"}
    assert s["by_status"]["failed"]["count"] == 1  # tr-p3 (0002)
    assert s["by_reconciliation"]["mismatched"]["count"] == 1 and s["mismatched"] == ["tr-c2"]
    assert s["by_direction"]["in"]["amount"] == {"GHS": "59.99"}
    assert s["wallet"][0]["currency"] == "GHS" and Decimal(s["wallet"][0]["balance"]) > 0
    daily_out = next(r for r in s["limits"] if r["period"] == "daily")
    assert Decimal(daily_out["out_used"]) >= Decimal("263.75")
    assert Decimal(daily_out["per_transaction"]) > 0  # the service's `perTransaction`, read by its JSON name

    wb = load_workbook(s["report_files"]["xlsx"])
    assert {"transactions", "summary", "by kind", "by reconciliation", "wallet", "limits"} <= set(
        wb.sheetnames
    )
    rows = list(wb["transactions"].iter_rows(values_only=True))
    ref_col, rec_col = rows[0].index("reference"), rows[0].index("reconciliation")
    line = next(i for i, r in enumerate(rows) if r[ref_col] == "tr-c2")
    assert rows[line][rec_col] == "mismatched"
    assert wb["transactions"].cell(line + 1, 1).fill.fgColor.rgb.endswith("FFC7CE")
    assert wb["transactions"].cell(2 if line != 1 else 3, 1).fill.fgColor.rgb == "00000000"

    only_payouts = asyncio.run(
        transactions_report(params.model_copy(update={"kind": "payout", "status": "delivered"}))
    )
    assert only_payouts["transactions"] == 2 and only_payouts["by_kind"]["payout"]["amount"] == {
        "GHS": "260.50"
    }


def test_default_window_is_the_previous_accra_day() -> None:
    start, end = previous_day(datetime(2026, 3, 10, 0, 30, tzinfo=UTC))  # Accra is UTC+0 all year
    assert start.isoformat() == "2026-03-09T00:00:00+00:00" and end - start == timedelta(days=1)
    params = TransactionsReportParams.model_validate(
        {"from": "2026-03-01T00:00:00", "to": "2026-03-02T00:00:00"}
    )
    assert params.from_ == datetime(2026, 3, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="before"):
        TransactionsReportParams.model_validate(
            {"from": "2026-03-02T00:00:00Z", "to": "2026-03-01T00:00:00Z"}
        )
