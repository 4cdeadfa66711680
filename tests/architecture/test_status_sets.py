"""Payout, purchase and collection status sets live in connectors/payments/models.py only (sandbox/ too);
the checker finds a copy."""

from __future__ import annotations

import pytest

from tests.architecture.status_sets import restated_sets, tree_restatements


def test_no_status_set_is_spelled_out_outside_the_connector() -> None:
    assert tree_restatements() == []


@pytest.mark.parametrize(
    "source",
    [
        'AWAITING_REVIEW = frozenset({"in_review", "held"})\n',
        'def f(o):\n    return o.status in {"failed", "refunded"}\n',
        'WAITED_ON = ("outcome_unknown", "refund_failed")\n',
        'x = [s for s in states if s in ["delivered", "failed", "refunded"]]\n',
        'keep = {"failed", "refunded", *OTHERS}\n',
        'FINAL = frozenset({"settled", "failed", "expired"})\n',  # a collection set (the emulator's copy)
    ],
)
def test_a_restated_set_is_reported(source: str) -> None:
    found = restated_sets(source, "synthetic.py")
    assert len(found) == 1 and found[0].startswith("synthetic.py:")


@pytest.mark.parametrize(
    "source",
    [
        "from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES\n",
        'KEYS = ("cached", "fresh", "failed")\n',  # one status among other words
        'CHART = [("delivered", "ok"), ("failed", "bad")]\n',  # pairs, not a set of statuses
    ],
)
def test_imports_and_other_words_pass(source: str) -> None:
    assert restated_sets(source) == []


def test_the_refused_outcomes_are_stated_once() -> None:
    """A sheet refused before sending (`tasks/runtime/run_outcomes.py`): the run's end state, its alert and
    its operator's notice read the one set."""
    from payops.tasks.runtime.run_outcomes import REFUSED_OUTCOMES

    assert tree_restatements(REFUSED_OUTCOMES, home="tasks/runtime/run_outcomes.py") == []
    copy = 'if outcome in ("invalid_input", "preflight_failed"):\n    tell()\n'
    assert restated_sets(copy, "synthetic.py", REFUSED_OUTCOMES)
