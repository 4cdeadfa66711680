"""Alert events (tasks/events/alerts.py), the wallet rule (tasks/ledger/wallet_watch.py) and automation
files, offline."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from payops.deployments.alerts import AlertSetupError, fill_links, load_alert_specs
from payops.store.settings import PayopsSettings
from payops.tasks.events.alerts import (
    EVENT_NAMES,
    PAYOUT_APPROVED,
    PAYOUT_COMPLETED,
    PAYOUT_FAILED,
    PAYOUT_NOT_APPROVED,
    SETTLEMENT_RETRY_FAILED,
    Crossings,
    emit_approved,
    emit_events_lag,
    emit_low_balance,
    emit_payout_outcome,
    emit_settlement_alerts,
    lag_alert_after,
    payout_run_event,
)
from payops.tasks.ledger.wallet_watch import assess
from payops.tasks.payouts.preflight import CurrencyCheck
from payops.tasks.settlements import RetryResult, RunInfo
from prefect.server.utilities.user_templates import render_user_template_sync

DESTINATIONS = ["233241234567", "233209876543"]


def summary(**overrides: Any) -> dict[str, Any]:
    base = {
        "label": "payroll-2026-11",
        "source": "/home/ops/sheets/payroll.xlsx",
        "outcome": "completed",
        "rows_total": 5,
        "rows_valid": 5,
        "rows_invalid": 0,
        "errors": [{"row": 3, "column": "destination", "message": f"bad number {DESTINATIONS[0]}"}],
        "batches": 1,
        "payouts_by_status": {"delivered": 2, "failed": 1, "in_review": 1},
        "amount_total": "52.50",
        "fee_total": "1.05",
        "refused_items": 1,
        "awaiting_review": ["payroll-2026-11-r4"],
        "not_final": ["payroll-2026-11-r4"],
        "preflight": {"problems": [], "notes": ["1 payee name(s) do not match (rows 2)"]},
        "report_files": {"xlsx": "s3://bucket-of-acme/reports/payroll-2026-11.xlsx", "csv": "/srv/r/p.csv"},
    }
    return {**base, **overrides}


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> None:
        self.events.append(kwargs)


def test_a_completed_run_with_failures_is_an_attention_event_with_counts_only() -> None:
    rec = Recorder()
    emit_payout_outcome(summary(), rec)
    (event,) = rec.events
    assert event["event"] == PAYOUT_COMPLETED
    assert event["resource"]["prefect.resource.id"] == "payops.payout-run.payroll-2026-11"
    assert event["resource"]["payops.attention"] == "yes"
    p = event["payload"]
    assert (p["delivered"], p["failed"], p["refused"], p["awaiting_review"], p["payouts"]) == (2, 1, 1, 1, 4)
    assert p["report_files"] == {"xlsx": "payroll-2026-11.xlsx", "csv": "p.csv"}
    text = json.dumps(event, default=str)
    for secret in [*DESTINATIONS, "payroll-2026-11-r4", "bucket-of-acme", "/home/ops"]:
        assert secret not in text


def test_a_clean_run_needs_no_attention_and_a_dry_run_emits_nothing() -> None:
    rec = Recorder()
    clean = summary(payouts_by_status={"delivered": 4}, refused_items=0, awaiting_review=[], not_final=[])
    emit_payout_outcome(clean, rec)
    assert rec.events[0]["resource"]["payops.attention"] == "no"
    assert payout_run_event(summary(outcome="dry_run")) is None


@pytest.mark.parametrize(
    ("comment", "reason"), [("no approval within 60s", "timeout"), ("wrong month", "rejected")]
)
def test_not_approved_says_why_without_the_comment(comment: str, reason: str) -> None:
    event, facts = payout_run_event(
        summary(outcome="not_approved", approval={"approved": False, "comment": comment})
    )
    assert event == PAYOUT_NOT_APPROVED and facts["reason"] == reason
    assert comment not in json.dumps(facts)


@pytest.mark.parametrize("outcome", ["invalid_input", "preflight_failed"])
def test_refused_runs_are_failed_events(outcome: str) -> None:
    problems = ["GHS: wallet has 10.00 available, the sheet needs 53.55 (amounts 52.50 + fees 1.05)"]
    event, facts = payout_run_event(summary(outcome=outcome, preflight={"problems": problems}))
    assert event == PAYOUT_FAILED and facts["problems"] == problems


def test_crossings_turn_on_once_and_rearm_when_off() -> None:
    memory: dict[str, bool] = {}
    c = Crossings(memory=memory)
    seen = [asyncio.run(c.turned_on("wallet:GHS", on)) for on in (False, True, True, False, True)]
    assert seen == [False, True, False, False, True]
    assert memory == {"wallet:GHS": True}


def test_assess_low_by_threshold_and_by_limit_headroom() -> None:
    rooms = {
        "GHS": CurrencyCheck("GHS", available=Decimal("1000.00"), daily_remaining=Decimal("500.00")),
        "USD": CurrencyCheck("USD", available=Decimal("900.00"), daily_remaining=Decimal("10000")),
    }
    watches = {
        w.currency: w
        for w in assess(rooms, {"GHS": Decimal("600.00")}, Decimal("100"), {"USD": Decimal("1000")})
    }
    ghs, usd = watches["GHS"], watches["USD"]
    assert ghs.low and ghs.after_upcoming == Decimal("400.00")
    assert ghs.reasons == ["GHS: upcoming payouts 600.00 exceed the daily headroom 500.00"]
    assert usd.low and "below the threshold 1000" in usd.reasons[0]
    calm = assess(rooms, {"GHS": Decimal("100.00")}, Decimal("100"))
    assert not any(w.low for w in calm)
    assert assess({}, {"EUR": Decimal("1")}, Decimal("0"))[0].reasons == ["EUR: no balance in the wallet"]


def test_low_balance_event_carries_the_figures() -> None:
    rooms = {"GHS": CurrencyCheck("GHS", available=Decimal("50.00"))}
    (watch,) = assess(rooms, {"GHS": Decimal("120.00")}, Decimal("0"))
    rec = Recorder()
    emit_low_balance(watch, 24, 2, rec)
    p = rec.events[0]["payload"]
    assert rec.events[0]["resource"]["prefect.resource.id"] == "payops.wallet.GHS"
    assert (p["available"], p["upcoming"], p["after_upcoming"], p["upcoming_runs"]) == (
        "50.00",
        "120.00",
        "-70.00",
        2,
    )


def _run(run_id: str, outcome: str | None, status: str = "completed") -> RunInfo:
    return RunInfo(run_id, f"ref-{run_id}", status, outcome, 3, Decimal("300.00"), "GHS", datetime.now(UTC))


def test_settlement_alerts_only_for_retries_made_now_and_the_policy_once() -> None:
    fresh = RetryResult(_run("r1", "failed_all"), "retried", retry=_run("r1-retry", "failed_all"))
    old = RetryResult(_run("r2", "failed_all"), "retried_before", retry=_run("r2-retry", "failed_all"))
    good = RetryResult(_run("r3", "failed_partial"), "retried", retry=_run("r3-retry", "settled"))
    rec, memory = Recorder(), {}
    crossings = Crossings(memory=memory)
    n = asyncio.run(
        emit_settlement_alerts("lbl", [fresh, old, good], {"xlsx": "/x/lbl.xlsx"}, crossings, rec)
    )
    assert n == 1 and rec.events[0]["event"] == SETTLEMENT_RETRY_FAILED
    p = rec.events[0]["payload"]
    assert (p["run_id"], p["retry_id"], p["retry_outcome"], p["reason"]) == (
        "r1",
        "r1-retry",
        "failed_all",
        "failed_again",
    )

    blocked = RetryResult(_run("r4", "failed_all"), "alert", code="settlement_policy_invalid")
    for expected in (1, 0):  # the hourly re-run while the policy stays broken does not repeat the alert
        assert asyncio.run(emit_settlement_alerts("lbl", [blocked], {}, crossings, Recorder())) == expected


def test_events_lag_alert_once_per_crossing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_EVENTS_LAG_ALERT_MINUTES", "10")
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    old = {"oldest_emitted_at": (now - timedelta(minutes=30)).isoformat(), "events_emitted": 7}
    fresh = {"oldest_emitted_at": (now - timedelta(minutes=2)).isoformat(), "events_emitted": 3}
    crossings, rec = Crossings(memory={}), Recorder()
    limit = lag_alert_after(PayopsSettings.from_env())
    sums = (fresh, old, old, fresh, old)
    seen = [asyncio.run(emit_events_lag(s, limit, now, crossings, rec)) for s in sums]
    assert seen == [False, True, False, False, True]
    assert (
        rec.events[0]["payload"]["lag_minutes"] == 30.0 and rec.events[0]["payload"]["limit_minutes"] == 10.0
    )


def test_a_bad_lag_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_EVENTS_LAG_ALERT_MINUTES", "soon")
    with pytest.raises(ValueError, match="PAYOPS_EVENTS_LAG_ALERT_MINUTES: Input should be a valid number"):
        PayopsSettings.from_env()


# -- automation files --------------------------------------------------------------------------------------
@dataclass
class FakeEvent:
    payload: dict[str, Any]


SAMPLE_PAYLOADS: dict[str, dict[str, Any]] = {}


def _payload(event: str, match: dict[str, str] | None = None) -> dict[str, Any]:
    rec = Recorder()
    rooms = {"GHS": CurrencyCheck("GHS", available=Decimal("50.00"), daily_remaining=Decimal("900"))}
    if event == PAYOUT_COMPLETED and (match or {}).get("payops.attention") == "no":
        clean = summary(payouts_by_status={"delivered": 4}, refused_items=0, awaiting_review=[], not_final=[])
        emit_payout_outcome(clean, rec, people={"started_by": "olu"})
    elif event == PAYOUT_COMPLETED:
        emit_payout_outcome(summary(), rec)
    elif event == PAYOUT_APPROVED:
        emit_approved("payroll-2026-11", ["bea"], 4, {"GHS": "52.50"}, {"started_by": "olu"}, rec)
    elif event == PAYOUT_NOT_APPROVED:
        emit_payout_outcome(
            summary(outcome="not_approved", approval={"approved": False, "comment": "no approval within 9s"}),
            rec,
        )
    elif event == PAYOUT_FAILED:
        emit_payout_outcome(summary(outcome="preflight_failed", preflight={"problems": ["GHS: short"]}), rec)
    elif event == "payops.payout-run.needs-approval":
        from payops.tasks.events.alerts import emit_needs_approval
        from payops.tasks.payouts.preflight import Preflight

        pf = Preflight(
            {"GHS": CurrencyCheck("GHS", count=4, amount=Decimal("52.50"), fees=Decimal("1.05"))}, {}
        )
        emit_needs_approval("payroll-2026-11", pf, 3600, rec)
    elif event == "payops.payout-run.approval-reminder":
        from payops.tasks.events.alerts import emit_approval_reminder

        emit_approval_reminder("payroll-2026-11", 540, rec)
    elif event == SETTLEMENT_RETRY_FAILED:
        fresh = RetryResult(_run("r1", "failed_all"), "retried", retry=_run("r1-retry", "failed_all"))
        asyncio.run(emit_settlement_alerts("lbl", [fresh], {"xlsx": "x.xlsx"}, Crossings(memory={}), rec))
    elif event == "payops.wallet.low-balance":
        emit_low_balance(assess(rooms, {"GHS": Decimal("120.00")}, Decimal("0"))[0], 24, 2, rec)
    elif event == "payops.reconciliation.difference":
        from payops.tasks.events.alerts import emit_reconciliation_difference

        counts = {"balance_unexplained": 1, "reversed_after_delivery": 2}
        emit_reconciliation_difference("day", "2026-11-22", "differences", counts, {"xlsx": "/r/x.xlsx"}, rec)
    elif event == "payops.events.lagging":
        now = datetime.now(UTC)
        lag = {"oldest_emitted_at": (now - timedelta(hours=1)).isoformat(), "events_emitted": 4}
        asyncio.run(emit_events_lag(lag, timedelta(minutes=15), now, Crossings(memory={}), rec))
    (emitted,) = rec.events
    assert emitted["event"] == event
    return emitted["payload"] | {"flow_run_id": "7d1f3c1a-0000-4000-8000-000000000001"}


def test_every_alert_event_has_one_automation_and_its_templates_render() -> None:
    """One automation per event, or per event and label (a completed run: one for attention, one not)."""
    specs = load_alert_specs()
    by_event = {e: [s for s in specs if e in s.trigger["expect"]] for e in EVENT_NAMES}
    assert all(found for found in by_event.values()), by_event
    for found in by_event.values():
        matches = [json.dumps(s.trigger.get("match") or {}, sort_keys=True) for s in found]
        assert len(set(matches)) == len(found) and (len(found) == 1 or "{}" not in matches), found
    for event, spec in ((e, s) for e, found in by_event.items() for s in found):
        context = {"event": FakeEvent(_payload(event, spec.trigger.get("match")))}
        subject = render_user_template_sync(
            fill_links(spec.subject, "https://console", "https://ui"), context
        )
        body = render_user_template_sync(fill_links(spec.body, "https://console", "https://ui"), context)
        assert "{{" not in subject + body and "${" not in subject + body and "None" not in subject, (
            event,
            body,
        )
        assert "7d1f3c1a-0000-4000-8000-000000000001" in body, event  # a link to the run
        assert len(subject) < 160 and len(body) < 1200, event  # short, human


def test_rendered_attention_message_has_the_facts() -> None:
    (spec,) = [
        s
        for s in load_alert_specs()
        if PAYOUT_COMPLETED in s.trigger["expect"] and s.trigger["match"]["payops.attention"] == "yes"
    ]
    body = render_user_template_sync(
        fill_links(spec.body, "https://c", "https://u"), {"event": FakeEvent(_payload(PAYOUT_COMPLETED))}
    )
    assert "2 of 4 payouts delivered, 1 failed, 1 refused by the service, 1 awaiting review" in body
    assert "https://c/runs/7d1f3c1a-0000-4000-8000-000000000001" in body and "payroll-2026-11.xlsx" in body


def test_a_broken_automation_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "name: 'payops: x'\ntrigger: {type: event, posture: Sideways}\nsubject: s\nbody: b\n",
        encoding="utf-8",
    )
    with pytest.raises(AlertSetupError, match=r"bad.yaml: trigger.posture"):
        load_alert_specs(tmp_path)
    (tmp_path / "bad.yaml").write_text("name: other\ntrigger: {type: event}\nsubject: s\nbody: b\n")
    with pytest.raises(AlertSetupError, match="name must start with 'payops: '"):
        load_alert_specs(tmp_path)


def _rendered(event: str, payload: dict[str, Any], attention: str | None = None) -> tuple[str, str]:
    (spec,) = [
        s
        for s in load_alert_specs()
        if event in s.trigger["expect"]
        and (attention is None or s.trigger.get("match", {}).get("payops.attention") == attention)
    ]
    context = {"event": FakeEvent(payload | {"flow_run_id": "7d1f3c1a-0000-4000-8000-000000000001"})}
    subject = render_user_template_sync(fill_links(spec.subject, "https://c", "https://u"), context)
    return subject, render_user_template_sync(fill_links(spec.body, "https://c", "https://u"), context)


def test_outcome_messages_name_whose_run_it_is_and_a_rejection_never_quotes_the_comment() -> None:
    """Issue 47: approval, completion and rejection reach the run's initiator (and uploader) through the
    alerts too; the rejecter is named, their comment (free text) stays out of every payload."""
    from payops.tasks.payouts.run_summary import Decision, PayoutRunSummary

    who = {"started_by": "olu", "uploaded_by": "ada"}
    rejected = PayoutRunSummary.model_validate(
        summary(outcome="not_approved", approval={"approved": False, "comment": "wrong month <b>x</b>"})
    )
    rejected.decision = Decision(kind="rejected", by="bea", reason="wrong month <b>x</b>")
    rec = Recorder()
    emit_payout_outcome(rejected, rec, people=who)
    p = rec.events[0]["payload"]
    assert (p["rejected_by"], p["started_by"], p["uploaded_by"]) == ("bea", "olu", "ada")
    assert "wrong month" not in json.dumps(rec.events[0], default=str)
    _, body = _rendered(PAYOUT_NOT_APPROVED, p)
    assert "Payout run payroll-2026-11 (started by olu, sheet uploaded by ada) was rejected by bea" in body

    emit_approved("payroll-2026-11", ["bea", "cat"], 1, {"GHS": "2007.01"}, {"started_by": "olu"}, rec)
    assert rec.events[1]["event"] == PAYOUT_APPROVED
    subject, body = _rendered(PAYOUT_APPROVED, rec.events[1]["payload"])
    assert subject == "Payout run payroll-2026-11 approved: sending 1 payout"
    assert "(started by olu) was approved by bea, cat: sending 1 payout (GHS 2007.01)" in body

    clean = summary(payouts_by_status={"delivered": 4}, refused_items=0, awaiting_review=[], not_final=[])
    emit_payout_outcome(clean, rec, people={"started_by": "olu"})
    assert rec.events[2]["resource"]["payops.attention"] == "no"
    subject, body = _rendered(PAYOUT_COMPLETED, rec.events[2]["payload"], attention="no")
    assert subject == "Payout run payroll-2026-11 completed: 4 of 4 payouts delivered"
    assert "(started by olu) completed: 4 of 4 payouts delivered, none failed. Amount 52.50" in body
