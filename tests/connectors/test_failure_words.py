"""Every failure code a person can meet has words and a next step (`connectors.payments.failure_words`).

The codes are read from the code that produces them, not from a copy: the spec's error map, the emulator's
payout failure reasons and the codes its payout engine and limits refuse a payout with.
"""

from __future__ import annotations

import inspect
import re

import pytest
from payops.connectors.payments.errors import ERROR_CLASSES_BY_CODE
from payops.connectors.payments.failure_words import FAILURE_WORDS, failure_words, retried_next_step
from payops.sandbox import limits as emulator_limits
from payops.sandbox.engine import payouts as emulator_payouts

_RAISED = re.compile(r'ApiError\(\s*\d{3},\s*"([a-z_]+)"')


def documented_codes() -> set[str]:
    """The spec's error codes and every reason or refusal the emulator gives a payout."""
    spec = {code for _, code in ERROR_CLASSES_BY_CODE}
    reasons = {r for steps in emulator_payouts.TEST_VALUES.values() for _, _, r in steps if r}
    refusals = {
        code
        for module in (emulator_payouts, emulator_limits)
        for code in _RAISED.findall(inspect.getsource(module))
    }
    return spec | reasons | refusals


CODES = sorted(documented_codes())


def test_the_codes_were_read_from_the_code() -> None:
    assert len(CODES) >= 40
    assert {"account_not_found", "insufficient_funds_at_provider", "insufficient_balance"} <= set(CODES)
    assert {"daily_limit_exceeded", "provider_timeout"} <= set(CODES)


@pytest.mark.parametrize("code", CODES)
def test_every_documented_code_has_words_and_a_next_step(code: str) -> None:
    assert code in FAILURE_WORDS
    words, next_step = failure_words(code)
    assert words.strip() and next_step.strip()
    assert words.endswith(".") and next_step.endswith(".")


@pytest.mark.parametrize("code", sorted(FAILURE_WORDS))
def test_no_words_carry_a_code(code: str) -> None:
    """Words are for people: never the raw code, never an underscore (a code with one cannot hide in them)."""
    words, next_step = FAILURE_WORDS[code]
    for text in (words, next_step):
        assert "_" not in text, text
        assert text.strip().lower() != code
    assert words != next_step


def test_an_unknown_code_is_named_and_sends_the_operator_to_support() -> None:
    words, next_step = failure_words("wallet_frozen_by_regulator")
    assert words == "The service gave the code wallet_frozen_by_regulator."
    assert next_step == "Contact support with the run's label."
    assert failure_words("403").words == "The service gave the code 403."


def test_a_retried_row_points_at_its_retry() -> None:
    assert "pay-2026-11-rt1" in retried_next_step("pay-2026-11-rt1")
