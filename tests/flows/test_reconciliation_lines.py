"""What `payops reconcile` prints for a day close (flows/summaries.py `ReconciliationSummary.lines`): the
figures, also on the first close, which has nothing to compare with yet (issue 47: "baseline" alone)."""

from __future__ import annotations

from payops.flows.summaries import ReconciliationSummary

CLOSE = {
    "label": "reconciliation-2026-11-27",
    "day": "2026-11-27",
    "outcome": "completed",
    "scope": "day",
    "transactions": 1204,
    "from": "2026-10-28",
    "outside_payops": 3,
}


def test_a_first_close_prints_the_balances_it_starts_from() -> None:
    first = ReconciliationSummary.model_validate(
        {
            **CLOSE,
            "status": "baseline",
            "balances": {"GHS": {"balance": "990484.52", "reserved": "0.00", "change": None}},
        }
    )
    assert first.lines()[:3] == [
        "reconciliation of day 2026-11-27: baseline",
        "  GHS: balance 990484.52, reserved 0.00 (the baseline the next close compares with)",
        "  1,204 transactions since 2026-10-28; 3 outside payops",
    ]


def test_a_later_close_prints_what_moved() -> None:
    figures = {"balance": "980000.00", "reserved": "0.00", "change": "-10484.52"}
    later = ReconciliationSummary.model_validate(
        {
            **CLOSE,
            "status": "clean",
            "balances": {"GHS": {**figures, "movements": "-10484.52", "unexplained": "0.00"}},
        }
    )
    assert later.lines()[1] == (
        "  GHS: balance 980000.00, reserved 0.00; change -10484.52, movements -10484.52, unexplained 0.00"
    )
