"""Notices for one user (store/notices.py) and the outcome texts (tasks/approval/outcome_notices.py), offline:
a run's outcome reaches its initiator and uploader only, stays new until read, survives the run's approval
notices being closed; texts in plain words, counted, money one way, a comment quoted on one line and
capped."""

from __future__ import annotations

from pathlib import Path

import pytest
from payops.store.database import migrate, open_engine
from payops.store.notices import Notices, recipients
from payops.tasks.approval.approvals import Start
from payops.tasks.approval.outcome_notices import (
    MAX_COMMENT,
    approved_text,
    completed_text,
    crashed_text,
    outcome_notice,
    people,
    quoted,
    tell,
)
from payops.tasks.payouts.run_summary import Decision, PayoutRunSummary

RUN = "7d1f3c1a-0000-4000-8000-000000000001"


@pytest.fixture
def notices(tmp_path: Path) -> Notices:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    migrate(engine)
    return Notices(engine)


def test_a_users_notice_shows_to_them_alone_whatever_their_role(notices: Notices) -> None:
    notices.post(
        "approval_needed", RUN, "payroll", "Payout run payroll waits", role="approver", excluded=("olu",)
    )
    assert (
        tell(
            notices.engine,
            "run_rejected",
            RUN,
            "payroll",
            "rejected: wrong month",
            people(Start("console", "olu", "ada")),
        )
        == 2
    )
    olu = notices.for_user("olu", "operator")
    assert [(n.kind, n.personal, n.open) for n in olu] == [("run_rejected", True, True)]
    assert [n.kind for n in notices.for_user("ada", "operator")] == ["run_rejected"]  # the uploader too
    assert [n.kind for n in notices.for_user("dee", "operator")] == []  # another operator sees nothing
    assert [n.kind for n in notices.for_user("bea", "approver")] == ["approval_needed"]
    assert [n.kind for n in notices.for_user("olu", "approver")] == [
        "run_rejected"
    ]  # excluded from approving

    notices.close_run(RUN)  # the run decided: the approvers' notice closes, the user's stays new
    assert notices.for_user("bea", "approver") == [] and len(notices.for_user("olu", "operator")) == 1
    notices.mark_read("olu")
    assert notices.for_user("olu", "operator") == []
    (read,) = notices.for_user("olu", "operator", open_only=False)
    assert not read.open and read.text == "rejected: wrong month"
    assert len(notices.for_user("ada", "operator")) == 1  # ada has not read hers


def test_a_notice_is_for_a_role_or_one_user_and_nobody_is_told_twice(notices: Notices) -> None:
    with pytest.raises(ValueError, match="a role or for one user"):
        notices.post("run_completed", RUN, "l", "t", role="operator", user="olu")
    with pytest.raises(ValueError, match="not one of"):
        notices.post("gossip", RUN, "l", "t", user="olu")
    assert recipients("olu", "olu", None) == ("olu",)
    assert people(Start("cli", "olu", "olu")) == {"started_by": "olu", "uploaded_by": None}
    assert tell(notices.engine, "run_completed", RUN, "l", "t", people(Start())) == 0  # from Prefect: nobody


def test_a_comment_is_quoted_on_one_line_and_capped() -> None:
    hostile = "wrong month\n\n<script>alert(1)</script>\x07" + "x" * 1000
    q = quoted(hostile)
    assert "\n" not in q and "\x07" not in q and len(q) == MAX_COMMENT and q.endswith("…")
    assert q.startswith("wrong month <script>alert(1)</script> x")  # escaped where shown, not here


def _summary(**fields: object) -> PayoutRunSummary:
    base = {
        "label": "payroll-nov",
        "outcome": "completed",
        "rows_total": 6,
        "rows_valid": 6,
        "currency": "GHS",
    }
    return PayoutRunSummary.model_validate({**base, **fields})


def test_the_outcome_texts_are_plain_words_with_the_figures() -> None:
    done = _summary(
        payouts_by_status={"delivered": 3, "failed": 2, "in_review": 1},
        refused_items=1,
        awaiting_review=["payroll-nov-r6"],
        amount_total="1234.5",
        fee_total="12.3",
        attention_total=4,
    )
    kind, text = outcome_notice(done.as_json())
    assert kind == "run_completed"
    assert text == (
        "Payout run payroll-nov completed with failures: 3 of 6 payouts delivered, 2 failed, 1 in review, "
        "1 refused by the service. Awaiting review, followed after the run: 1 payout. "
        "Amount GHS 1,234.50, fees GHS 12.30. 4 rows need a look: see the run's page and its reports."
    )
    assert "payroll-nov-r6" not in text  # never a row's reference
    clean = completed_text(
        _summary(payouts_by_status={"delivered": 1}, amount_total="5", fee_total="0").as_json()
    )
    assert (
        clean == "Payout run payroll-nov completed: 1 of 1 payout delivered. Amount GHS 5.00, fees GHS 0.00."
    )

    rejected = _summary(
        outcome="not_approved", amount_total="78", approval={"approved": False, "comment": "wrong month"}
    )
    rejected.decision = Decision(kind="rejected", by="bea", reason="wrong month")
    assert outcome_notice(rejected.as_json(), rejected.decision) == (
        "run_rejected",
        "Payout run payroll-nov was rejected by bea: “wrong month”. Nothing was sent (6 payouts, GHS 78.00).",
    )
    expired = _summary(
        outcome="not_approved", approval={"approved": False, "comment": "no approval within 3600s"}
    )
    kind, text = outcome_notice(
        expired.as_json(), Decision(kind="not_approved", reason="no approval within 3600s")
    )
    assert kind == "run_not_approved" and "nobody approved it within 60 minutes. Nothing was sent" in text
    kind, text = outcome_notice(_summary(outcome="invalid_input", rows_invalid=2).as_json())
    assert kind == "run_failed" and "the sheet has 2 invalid rows. Nothing was sent" in text
    short = {"problems": ["GHS: wallet has 10.00 available, the sheet needs 53.55"]}
    kind, text = outcome_notice(_summary(outcome="preflight_failed", preflight=short).as_json())
    assert text == (
        "Payout run payroll-nov stopped at the pre-flight: GHS: wallet has 10.00 available, the sheet needs "
        "53.55. Nothing was sent."
    )
    assert outcome_notice(_summary(outcome="dry_run").as_json()) is None
    assert approved_text("payroll-nov", ["bea", "cat"], 1, {"GHS": "2007.01"}) == (
        "Payout run payroll-nov was approved by bea, cat: sending 1 payout (GHS 2,007.01)."
    )
    assert "crashed. Start it again with the same name" in crashed_text("payroll-nov", "", True)
    assert "stopped with an error (CredentialsMissing)" in crashed_text(
        "payroll-nov", "CredentialsMissing", False
    )


def test_a_run_that_stops_without_its_summary_tells_its_initiator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's hook (an exception, a crash): the alert names the initiator, the notice reaches them."""
    import asyncio
    from types import SimpleNamespace
    from uuid import uuid4

    from payops.tasks.approval.approvals import sign_start
    from payops.tasks.approval.outcome_notices import PAYOUT_RUN_HOOKS

    from tests.flows.approval_support import key_pair, payops_db

    events: list[dict] = []
    monkeypatch.setattr("payops.tasks.events.alerts.default_emitter", lambda **event: events.append(event))
    start = sign_start(key_pair()[0], source="/s/crashy.xlsx", initiator="olu", channel="console")

    async def result(raise_on_failure: bool = False) -> BaseException:
        return RuntimeError("row 3: 233241234567 refused")

    state = SimpleNamespace(aresult=result, is_crashed=lambda: False, name="Failed")
    run = SimpleNamespace(
        id=uuid4(), name="crashy", parameters={"params": {"start": start, "source": "/s/crashy.xlsx"}}
    )
    (hook,) = PAYOUT_RUN_HOOKS["on_failure"]
    asyncio.run(hook(None, run, state))
    (event,) = events
    assert event["payload"]["started_by"] == "olu" and event["payload"]["error"] == "RuntimeError"
    with payops_db() as engine:
        (told,) = [n for n in Notices(engine).for_user("olu", "operator") if n.flow_run_id == str(run.id)]
    assert told.kind == "run_failed" and "stopped with an error (RuntimeError)" in told.text
    assert "233241234567" not in told.text
