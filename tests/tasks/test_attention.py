"""The rows needing a person: one rule (tasks/reports/attention.py) for the summary, highlight, artifact
and retry."""

from __future__ import annotations

from decimal import Decimal

import pytest
from payops.connectors.payments.models import PAYOUT_STATUSES
from payops.tasks.reports.attention import KINDS, attention_rows, attention_table, paid
from payops.tasks.rows.name_check import NameCheck
from payops.tasks.rows.outcome import RowOutcome, needs_retry, outcome_kind
from payops.tasks.rows.payout_row import PayoutRow


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
    assert mismatch["next_step"] == "Confirm the number with the payee before paying it again."
    refused = by_kind[(5, "refused")]
    assert (refused["code"], refused["reason"]) == (
        "insufficient_balance",
        "The wallet did not hold enough for the amount plus the fee.",
    )
    assert refused["next_step"] == "Top up the wallet, then retry the row."
    held = by_kind[(4, "awaiting_review")]
    assert (held["code"], held["reason"]) == ("held", "The service holds the payout for a check.")
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
            "code": "no_name_column",
            "reason": "no payee name column",
            "detail": None,
            "next_step": "Add a payee name column to the sheet so names are checked next time.",
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


def test_every_code_of_payops_own_has_words_of_its_own() -> None:
    """The statuses a row can end in without a reason and payops' own kinds never fall to the fallback."""
    from payops.connectors.payments.failure_words import FAILURE_WORDS
    from payops.connectors.payments.models import PAYOUT_AWAITING_REVIEW_STATUSES, PAYOUT_FAILED_STATUSES
    from payops.tasks.reports.attention import NAME_KINDS, NO_NAME_COLUMN, failure_code

    statuses = PAYOUT_FAILED_STATUSES | PAYOUT_AWAITING_REVIEW_STATUSES
    codes = {failure_code(RowOutcome(2, submission="accepted", status=s)) for s in statuses}
    codes |= {failure_code(RowOutcome(2, submission="invalid")), *NAME_KINDS.values(), NO_NAME_COLUMN}
    assert codes - set(FAILURE_WORDS) == set()


def test_the_artifact_table_and_the_summary_markdown_say_what_happened_in_words() -> None:
    from payops.store.settings import PayopsSettings
    from payops.tasks.reports.artifacts import summary_markdown
    from payops.tasks.reports.attention import ATTENTION_TABLE_HEADERS

    outcomes = {
        2: RowOutcome(2, "R-2", "B-0", "accepted", "failed", failure_reason="insufficient_funds_at_provider"),
        3: RowOutcome(3, "R-3", "B-0", "accepted", "failed", failure_reason="insufficient_funds_at_provider"),
        4: RowOutcome(4, "R-4", "B-0", "refused", error_code="rate_limited", error_message="slow down"),
    }
    table = [dict(zip(ATTENTION_TABLE_HEADERS, r, strict=True)) for r in attention_table(outcomes)]
    assert table[0]["failure reason"] == "insufficient_funds_at_provider"
    assert table[0]["what happened"] == "The provider could not fund the payout on its side."
    assert table[2]["error code"] == "rate_limited"
    assert table[2]["next step"].startswith("Wait a minute")

    found, _ = attention_rows([_row(r) for r in (2, 3, 4)], outcomes, [])
    assert found[2]["detail"] == "slow down"
    text = summary_markdown({"label": "run", "attention_rows": found}, PayopsSettings())
    assert "## What needs a person" in text
    assert (
        "| The provider could not fund the payout on its side. | Retry the row later; if it fails again, "
        "contact the provider. | 2 | `insufficient_funds_at_provider` |"
    ) in text
    assert "| Too many requests reached the service at once." in text
