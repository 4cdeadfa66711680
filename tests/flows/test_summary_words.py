"""The CLI's human output says failures in words with the next step; the JSON keeps the codes."""

from __future__ import annotations

from payops.deployments.cli.progress_display import failure_line
from payops.flows.summaries import PurchaseRunSummary
from payops.tasks.payouts.run_summary import PayoutRunSummary


def test_a_payout_runs_lines_say_failures_and_refusals_in_words() -> None:
    summary = PayoutRunSummary.model_validate(
        {
            "label": "march",
            "outcome": "completed",
            "payouts_by_status": {"delivered": 3, "failed": 2},
            "refused_items": 3,
            "refused_by_code": {"daily_limit_exceeded": 2, "wallet_frozen": 1},
            "attention_rows": [
                {"row": 3, "kind": "failed", "code": "account_not_found"},
                {"row": 5, "kind": "failed", "code": "account_not_found"},
                {"row": 6, "kind": "refused", "code": "daily_limit_exceeded"},
            ],
        }
    )
    text = summary.text()
    assert (
        "  failed: 2\n    2 × The number is not registered with the provider. Next: Check the number" in text
    )
    assert (
        "  refused by the service: 3\n    2 × Today's payout limit is reached. Next: Retry the row tomorrow"
        in text
    )
    assert (
        "    1 × The service gave the code wallet_frozen. Next: Contact support with the run's label." in text
    )
    assert "daily_limit_exceeded" not in text and "account_not_found" not in text
    assert summary.as_json()["refused_by_code"] == {"daily_limit_exceeded": 2, "wallet_frozen": 1}


def test_a_purchase_runs_refusals_are_in_words() -> None:
    summary = PurchaseRunSummary(
        label="airtime", outcome="completed", refused_items=1, refused_by_code={"product_not_sellable": 1}
    )
    assert "1 × The utility product is not on sale now." in summary.text()


def test_a_payout_failing_mid_run_prints_words_and_the_next_step() -> None:
    line = failure_line("R-1", "failed", "insufficient_funds_at_provider")
    assert line == (
        "payout R-1 failed: The provider could not fund the payout on its side. "
        "Next: Retry the row later; if it fails again, contact the provider."
    )
    assert failure_line("R-2", "refunded", None).startswith(
        "payout R-2 refunded: The payout was delivered, then"
    )
