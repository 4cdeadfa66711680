"""Alerts end to end on Prefect's server: flows emit events, the shipped automations (applied twice) send one
message per outcome through a Custom Webhook notification block to a receiver on 127.0.0.1.

The session's Prefect test server is a real ``prefect server`` (uvicorn subprocess) and runs the reactive
triggers and actions services (they run in ephemeral servers too), so no second server is started.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.connectors.payments import PaymentsClient
from payops.deployments.alerts import (
    NAME_PREFIX,
    apply_automations,
    load_alert_specs,
    load_recovery_automations,
)
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.flows.settlements import SettlementRetryParams, retry_failed_settlements
from payops.flows.wallet import WalletWatchParams, wallet_watch
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.settings import PayopsSettings
from payops.tasks.approval.approval_keys import ensure_key_pair
from payops.tasks.payouts.preflight import read_headroom

from tests.flows.support import payroll_rows, write_sheet
from tests.tasks.test_settlements import seed_runs, settings_for

pytestmark = pytest.mark.e2e

BLOCK = "payops-e2e-alerts"
WEBHOOK_TOKEN = "e2e-webhook-token-5f1c9a"
SECRETS = ("demo-test-secret", "demo-test-client", WEBHOOK_TOKEN, "Bearer", "eyJ")


class Receiver:
    """An HTTP receiver on 127.0.0.1 keeping every JSON message and the headers it came with."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.expected: list[dict[str, Any]] = []  # the messages a test waited for
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.messages.append(json.loads(body))
                    outer.headers.append(dict(self.headers))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def matching(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [m for m in list(self.messages) if predicate(m)]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60) -> dict:
        """The one message matching ``predicate``; after it arrives, wait a little for duplicates."""
        deadline = time.monotonic() + timeout
        while not self.matching(predicate):
            assert time.monotonic() < deadline, f"no message for {what}; got {self.messages}"
            time.sleep(0.25)
        time.sleep(3)  # a duplicate (a second automation, a re-emitted event) would arrive within this
        found = self.matching(predicate)
        assert len(found) == 1, f"{len(found)} messages for {what}: {found}"
        self.expected.append(found[0])
        return found[0]

    def unexpected(self) -> list[dict[str, Any]]:
        """Messages no test waited for (an alert sent twice, or for something that should stay quiet)."""
        return [m for m in list(self.messages) if not any(m is e for e in self.expected)]


async def _delete_payops_automations() -> None:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        for automation in await client.read_automations():
            if automation.name.startswith(NAME_PREFIX):
                await client.delete_automation(automation.id)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


@pytest.fixture(autouse=True)
def no_other_messages(receiver: Receiver) -> Iterator[None]:
    """After each test, every message received was one a test waited for (each test alone or in any order:
    a late duplicate of an earlier test fails the next one)."""
    yield
    assert receiver.unexpected() == []


@pytest.fixture(scope="module")
def applied(prefect_harness, receiver: Receiver) -> Iterator[list[tuple[str, str]]]:
    """The block saved and the automations applied twice (the second time must only update)."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client

    CustomWebhookNotificationBlock(
        name="payops e2e",
        url=receiver.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        headers={"Authorization": "Bearer {{token}}"},
        secrets={"token": WEBHOOK_TOKEN},
    ).save(BLOCK, overwrite=True)
    settings = PayopsSettings.from_env()
    first = asyncio.run(apply_automations(BLOCK, settings, console="https://console.example"))
    second = asyncio.run(apply_automations(BLOCK, settings, console="https://console.example"))

    async def ours() -> list[Any]:
        async with get_client() as client:
            return [a for a in await client.read_automations() if a.name.startswith(NAME_PREFIX)]

    names = [a.name for a in asyncio.run(ours())]
    recovery = [a.name for a in load_recovery_automations()]  # applied with the alerts (issue 43)
    assert sorted(names) == sorted([*(s.name for s in load_alert_specs()), *recovery])  # one each, no copies
    assert {action for _, action in first} == {"created"} and {action for _, action in second} == {"updated"}
    time.sleep(3)  # the triggers service loads automations on change
    try:
        yield second
    finally:
        asyncio.run(_delete_payops_automations())


@pytest.fixture(scope="module")
def emulator() -> Iterator[SandboxServer]:
    with (
        SandboxServer(
            SandboxConfig(
                delivery_delay_s=0.3,
                settlement_delay_s=0.2,
                events_lag_s=0,
                allow_local_webhooks=True,
                webhook_worker=False,
            )
        ) as s,
        pytest.MonkeyPatch.context() as mp,
    ):
        # The service keeps an events feed once the business has a webhook endpoint (never called here).
        endpoint = {"url": "http://127.0.0.1:9/hook"}
        url = f"{s.base_url}/_sandbox/businesses/demo/test/webhook-endpoints"
        httpx.post(url, json=endpoint, timeout=10).raise_for_status()
        for k, v in s.env.items():
            mp.setenv(k, v)
        mp.setenv("PAYOPS_BACKOFF_BASE_S", "0.05")
        mp.setenv("PAYOPS_BACKOFF_MAX_S", "1")
        ensure_key_pair(PayopsSettings.from_env().home_dir())  # approval runs pause (the session's home)
        yield s


def assert_nothing_sensitive(message: dict[str, Any], forbidden: list[str]) -> None:
    text = json.dumps(message)
    for word in [*SECRETS, *forbidden]:
        assert word not in text, f"{word!r} leaked into {message}"


def test_a_payout_run_with_failures_sends_one_message_with_its_facts(
    applied, receiver: Receiver, emulator: SandboxServer, tmp_path: Path
) -> None:
    rows = payroll_rows(6, prefix="AL", specials={1: "0001", 2: "0002", 3: "0007"})
    sheet = write_sheet(tmp_path / "alerts.xlsx", rows)
    params = PayoutRunParams(
        source=str(sheet), label="alerts-failures", report_dir=str(tmp_path / "r"), poll_deadline_s=4
    )
    state = asyncio.run(payout_spreadsheet(params, return_state=True))
    s = state.result()
    assert s["payouts_by_status"]["failed"] == 2 and len(s["awaiting_review"]) == 1
    m = receiver.wait_for(lambda m: "alerts-failures" in m["subject"], "the payout run with failures")
    assert m["subject"] == "Payout run alerts-failures: 2 failed, 0 refused"
    assert "3 of 6 payouts delivered, 2 failed, 0 refused by the service, 1 awaiting review" in m["body"]
    assert f"https://console.example/runs/{state.state_details.flow_run_id}" in m["body"]
    assert "alerts-failures.xlsx" in m["body"]
    assert receiver.headers[receiver.messages.index(m)]["Authorization"] == f"Bearer {WEBHOOK_TOKEN}"
    assert_nothing_sensitive(m, [r[6] for r in rows] + [r[0] for r in rows] + [str(tmp_path)])


def test_a_paused_run_and_a_low_balance_each_send_one_message(
    applied, receiver: Receiver, emulator: SandboxServer, tmp_path: Path
) -> None:
    """A run waits for approval (one message); wallet-watch counts it as upcoming and, with a threshold only
    its total breaks, alerts once over two watches; the rejection is one more message."""
    from prefect.flow_runs import resume_flow_run

    from tests.flows.approval_support import paused_run

    rows = payroll_rows(4, prefix="AP")
    sheet = write_sheet(tmp_path / "approve.xlsx", rows)
    upcoming = sum((Decimal(r[2]) for r in rows), Decimal(0))

    async def scenario() -> tuple[dict[str, Any], list[Any]]:
        params = PayoutRunParams(
            source=str(sheet),
            label="alerts-approval",
            report_dir=str(tmp_path / "r"),
            require_approval=True,
            approval_timeout_s=120,
        )
        flow_task = asyncio.create_task(payout_spreadsheet(params, return_state=True))
        run_id, _ = await paused_run("alerts-approval")
        async with PaymentsClient(settings_for(emulator)) as client:
            available = (await read_headroom(client))["GHS"].available
        watch = WalletWatchParams(
            threshold=available - upcoming / 2, horizon_hours=1, crossings_variable="payops-e2e-crossings"
        )
        watches = [await wallet_watch(watch), await wallet_watch(watch)]
        await asyncio.to_thread(
            receiver.wait_for, lambda m: "Approve payout run alerts-approval" in m["subject"], "the approval"
        )
        await resume_flow_run(run_id, run_input={"reject": True, "comment": "not this month"})
        return run_summary(await flow_task), watches

    summary, watches = asyncio.run(scenario())
    assert summary["outcome"] == "not_approved"
    first, second = watches
    assert first.upcoming_runs == 1 and first.currencies[0].upcoming == upcoming and first.outcome == "low"
    assert first.alerts_emitted == ["GHS"] and second.outcome == "low" and second.alerts_emitted == []

    approval = receiver.matching(lambda m: "Approve payout run alerts-approval" in m["subject"])[0]
    assert "4 payouts, amount" in approval["body"] and "within 2 minutes" in approval["body"]
    low = receiver.wait_for(lambda m: m["subject"].startswith("Wallet GHS low"), "the low balance")
    assert f"need {upcoming}" in low["body"] and "1 payout run(s)" in low["body"]
    rejected = receiver.wait_for(lambda m: "alerts-approval not approved" in m["subject"], "the rejection")
    assert "was rejected: nothing was sent (4 rows" in rejected["body"]
    for m in (approval, low, rejected):
        assert_nothing_sensitive(m, [r[6] for r in rows] + ["not this month"])


def test_a_failed_resettlement_sends_one_message(
    applied, receiver: Receiver, emulator: SandboxServer, tmp_path: Path
) -> None:
    ids = asyncio.run(seed_runs(emulator, ["failed_all"], then="failed_all"))
    params = SettlementRetryParams(report_dir=str(tmp_path), poll_deadline_s=30, run_id=ids["failed_all"])
    s = asyncio.run(retry_failed_settlements(params))
    (retry_id,) = s["retries_failed_again"]
    m = receiver.wait_for(
        lambda m: m["subject"].startswith(f"Settlement {ids['failed_all']}"), "the resettlement"
    )
    assert "retry failed again (failed_all)" in m["subject"]
    assert f"the retry {retry_id} ended failed_all" in m["body"] and "GHS" in m["body"]
    assert_nothing_sensitive(m, [])

    again = asyncio.run(retry_failed_settlements(SettlementRetryParams(report_dir=str(tmp_path))))
    assert again["retried_before"] == 1
    receiver.wait_for(lambda m: m["subject"].startswith(f"Settlement {ids['failed_all']}"), "no repeat")


def test_a_crashed_payout_run_sends_one_message_naming_only_the_error_type(
    applied, receiver: Receiver, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAYOPS_CLIENT_SECRET")  # the run stops before sending: no credentials
    sheet = write_sheet(tmp_path / "crash.xlsx", payroll_rows(2, prefix="CR"))
    params = PayoutRunParams(source=str(sheet), label="alerts-crash", report_dir=str(tmp_path / "r"))
    state = asyncio.run(payout_spreadsheet(params, return_state=True))
    assert state.is_failed()
    m = receiver.wait_for(lambda m: "alerts-crash" in m["subject"], "the failed run")
    assert m["subject"] == "Payout run alerts-crash failed (error)"
    assert "stopped with CredentialsMissing" in m["body"] and "same label" in m["body"]
    assert_nothing_sensitive(m, [str(tmp_path)])


def test_a_lagging_events_feed_sends_one_message(
    applied, receiver: Receiver, emulator: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0-minute limit makes every caught-up event late: the first catch-up alerts, the next is quiet."""
    from payops.flows.events import EventsCatchUpParams, events_catch_up

    asyncio.run(seed_runs(emulator, ["settled"]))  # the feed's events (settlement.status_changed)
    monkeypatch.setenv("PAYOPS_EVENTS_LAG_ALERT_MINUTES", "0")
    first = asyncio.run(events_catch_up(EventsCatchUpParams(variable="payops-e2e-cursor")))
    assert first["events_emitted"] > 0 and first["oldest_emitted_at"]
    m = receiver.wait_for(lambda m: m["subject"].startswith("Payments events lag"), "the lagging feed")
    assert f"emitted {first['events_emitted']} Payments Service event(s)" in m["body"]
    assert "limit 0.0" in m["body"] and "/runs/flow-run/" in m["body"]
    asyncio.run(events_catch_up(EventsCatchUpParams(variable="payops-e2e-cursor")))
    receiver.wait_for(lambda m: m["subject"].startswith("Payments events lag"), "no repeat")
    assert_nothing_sensitive(m, [])


def test_cli_reapplies_in_place_sends_a_test_and_names_a_wrong_block(
    applied, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.deployments.alerts import TEST_SUBJECT
    from payops.deployments.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")  # restored after the CLI sets it
    runner = CliRunner()
    r = runner.invoke(app, ["alerts", "apply", "--block", BLOCK, "--console-url", "https://console.example"])
    assert r.exit_code == 0, r.output
    applied_count = len(load_alert_specs()) + len(load_recovery_automations())
    assert r.output.count("updated: payops: ") == applied_count and "created" not in r.output
    recover = len(load_recovery_automations())
    told = len(load_alert_specs())
    said = f"{told} automations notify through {BLOCK}; {recover} recover runs a dead host left"
    assert said in r.output
    r = runner.invoke(app, ["alerts", "test", "--block", f"custom-webhook/{BLOCK}"])
    assert r.exit_code == 0 and f"sent through custom-webhook/{BLOCK}" in r.output, r.output
    receiver.wait_for(lambda m: m["subject"] == TEST_SUBJECT, "the test message", timeout=10)
    r = runner.invoke(app, ["alerts", "apply", "--block", "no-such-block"])
    assert r.exit_code == 2 and "no notification block named 'no-such-block'" in r.output
    assert "Traceback" not in r.output


def test_an_operators_run_tells_them_approval_rejection_and_completion(
    applied, receiver: Receiver, emulator: SandboxServer, tmp_path: Path
) -> None:
    """Issue 47: the outcome of a run reaches its initiator through the configured alerts (each message
    names them) and as their console notice; the rejection names the rejecter, the comment stays out of the
    message (free text) and goes to the initiator's notice only."""
    from payops.store.notices import Notices
    from payops.tasks.approval.approvals import sign_start

    from tests.flows.approval_support import decide_as, key_pair, paused_run, payops_db

    def params(label: str, prefix: str) -> PayoutRunParams:
        sheet = write_sheet(tmp_path / f"{label}.xlsx", payroll_rows(2, prefix=prefix))
        start = sign_start(key_pair()[0], source=str(sheet), initiator="olu", channel="cli")
        return PayoutRunParams(
            source=str(sheet), label=label, report_dir=str(tmp_path / "r"), start=start, require_approval=True
        )

    async def decided(p: PayoutRunParams, approve: bool, comment: str) -> tuple[str, Any]:
        flow_task = asyncio.create_task(payout_spreadsheet(p, return_state=True))
        run_id, _ = await paused_run(p.label)
        await decide_as(run_id, "bea", approve=approve, comment=comment)
        return run_id, run_summary(await flow_task)

    ok_id, ok = asyncio.run(decided(params("alerts-told-ok", "TOK"), True, "matches payroll"))
    assert ok["outcome"] == "completed" and ok["payouts_by_status"] == {"delivered": 2}
    receiver.wait_for(lambda m: m["subject"].startswith("Approve payout run alerts-told-ok"), "the ask")
    approved = receiver.wait_for(lambda m: "alerts-told-ok approved" in m["subject"], "the approval")
    assert approved["subject"] == "Payout run alerts-told-ok approved: sending 2 payouts"
    assert "(started by olu) was approved by bea: sending 2 payouts (GHS 22.00)" in approved["body"]
    done = receiver.wait_for(lambda m: "alerts-told-ok completed" in m["subject"], "the completion")
    assert done["subject"] == "Payout run alerts-told-ok completed: 2 of 2 payouts delivered"
    assert "(started by olu) completed: 2 of 2 payouts delivered, none failed. Amount 22.00" in done["body"]
    assert f"https://console.example/runs/{ok_id}" in done["body"]

    no_id, no = asyncio.run(decided(params("alerts-told-no", "TNO"), False, "wrong month, use the HR sheet"))
    assert no["outcome"] == "not_approved"
    receiver.wait_for(lambda m: m["subject"].startswith("Approve payout run alerts-told-no"), "ask again")
    rejected = receiver.wait_for(lambda m: "alerts-told-no not approved" in m["subject"], "the rejection")
    assert (
        "Payout run alerts-told-no (started by olu) was rejected by bea: nothing was sent" in rejected["body"]
    )
    for m in (approved, done, rejected):
        assert_nothing_sensitive(m, ["wrong month", "matches payroll", "TOK", "TNO", str(tmp_path)])

    with payops_db() as engine:
        mine = Notices(engine).for_user("olu", "operator")  # newest first
        (told,) = [n for n in mine if n.flow_run_id == no_id]
        assert told.kind == "run_rejected" and "rejected by bea: “wrong month, use the HR sheet”" in told.text
        assert [n.kind for n in mine if n.flow_run_id == ok_id] == ["run_completed", "run_approved"]
