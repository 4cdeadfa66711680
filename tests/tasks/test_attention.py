"""The rows needing a person: one rule (tasks/reports/attention.py) for the summary, highlight, artifact
and retry."""

from __future__ import annotations

from decimal import Decimal

import pytest
from payops.connectors.payments.models import PAYOUT_STATUSES
from payops.tasks.intake import PayoutRow
from payops.tasks.payouts.preflight import NameCheck
from payops.tasks.reports.attention import (
    KINDS,
    attention_rows,
    attention_table,
    needs_retry,
    outcome_kind,
    paid,
)
from payops.tasks.reports.run_reports import RowOutcome


def _row(n: int, name: str | None = "Ama Mensah") -> PayoutRow:
    return PayoutRow(
        row=n,
        reference=f"R-{n}",
        amount=Decimal("10.00"),
        currency="GHS",
        provider="mtn",
        destination_type="msisdn",
        destination=f"23324000000{n}",
        payee_name=name,
    )


@pytest.mark.parametrize(
    ("submission", "status", "kind", "paid_"),
    [
        ("accepted", "delivered", None, "yes"),
        ("accepted", "failed", "failed", "no"),
        ("accepted", "refunded", "failed", "no"),
        ("accepted", "held", "awaiting_review", "not yet"),
        ("accepted", "in_review", "awaiting_review", "not yet"),
        ("accepted", "dispatching", None, "not yet"),
        ("refused", None, "refused", "no"),
        ("invalid", None, "invalid", "no"),
    ],
)
def test_each_outcome_has_one_kind_and_a_paid_answer(submission, status, kind, paid_) -> None:
    assert outcome_kind(submission, status) == kind
    assert paid(submission, status) == paid_
    assert needs_retry(submission, status) == (kind in {"failed", "refused"})


def test_every_payout_status_is_classified() -> None:
    """A status the connector adds to PAYOUT_STATUSES must be decided here, not fall through silently."""
    for status in PAYOUT_STATUSES:
        assert paid("accepted", status) in {"yes", "no", "not yet"}


def test_name_verdicts_and_no_name_column_each_need_a_person_with_reference_status_and_paid() -> None:
    rows = [_row(2), _row(3, "Yaa"), _row(4), _row(5)]
    outcomes = {
        2: RowOutcome(2, reference="R-2", submission="accepted", status="delivered"),
        3: RowOutcome(3, reference="R-3", submission="accepted", status="delivered"),
        4: RowOutcome(4, reference="R-4", submission="accepted", status="held"),
        5: RowOutcome(5, reference="R-5", submission="refused", error_code="insufficient_balance"),
    }
    names = [
        NameCheck(2, "233240000002", "Ama Mensah", "Kofi Boateng", "mismatch"),
        NameCheck(3, "233240000003", "Yaa", "Yaa Quaye", "partial"),
        NameCheck(4, "233240000004", "Ama Mensah", None, "unverified"),
        NameCheck(5, "233240000005", "Ama Mensah", "Ama Mensah", "match"),
    ]
    found, total = attention_rows(rows, outcomes, names)
    assert total == len(found) == 5
    by_kind = {(a["row"], a["kind"]): a for a in found}
    assert set(by_kind) == {
        (4, "awaiting_review"),
        (5, "refused"),
        (2, "name_mismatch"),
        (3, "name_partial"),
        (4, "name_unverified"),
    }
    mismatch = by_kind[(2, "name_mismatch")]
    assert (mismatch["reference"], mismatch["status"], mismatch["paid"]) == ("R-2", "delivered", "yes")
    assert "Kofi Boateng" in mismatch["reason"]
    assert by_kind[(3, "name_partial")]["paid"] == "yes"
    assert by_kind[(4, "name_unverified")]["paid"] == "not yet"
    assert by_kind[(5, "refused")]["paid"] == "no"
    assert [a["kind"] for a in found] == sorted((a["kind"] for a in found), key=KINDS.index)

    sheetwide, _ = attention_rows(rows[:1], {}, [], no_name_column="no payee name column")
    assert sheetwide == [
        {
            "row": None,
            "kind": "no_name_column",
            "reference": None,
            "payee": None,
            "amount": None,
            "currency": None,
            "status": None,
            "paid": None,
            "reason": "no payee name column",
        }
    ]


def test_the_artifact_table_the_highlight_and_the_resubmit_sheet_agree() -> None:
    outcomes = {
        n: RowOutcome(n, reference=f"R-{n}", submission=sub, status=st)
        for n, (sub, st) in enumerate(
            [
                ("accepted", "delivered"),
                ("accepted", "failed"),
                ("accepted", "refunded"),
                ("accepted", "held"),
                ("refused", None),
                ("invalid", None),
                ("accepted", "dispatching"),
            ],
            start=2,
        )
    }
    table_rows = {r[0] for r in attention_table(outcomes)}
    assert table_rows == {n for n, o in outcomes.items() if outcome_kind(o.submission, o.status)}
    assert table_rows == {3, 4, 5, 6, 7}
    assert {n for n, o in outcomes.items() if o.needs_resubmit} == {3, 4, 6}


def test_the_summary_lists_the_first_rows_by_kind_and_counts_them_all() -> None:
    rows = [_row(r) for r in range(2, 12)]
    outcomes = {r: RowOutcome(r, reference=f"R-{r}", submission="accepted", status="failed") for r in (9, 11)}
    names = [NameCheck(r, f"23324000000{r}", "Ama", "Kofi", "mismatch") for r in range(2, 9)]
    kept, total = attention_rows(rows, outcomes, names, keep=4)
    assert total == 9
    assert [(a["row"], a["kind"]) for a in kept] == [
        (9, "failed"),
        (11, "failed"),
        (2, "name_mismatch"),
        (3, "name_mismatch"),
    ]
