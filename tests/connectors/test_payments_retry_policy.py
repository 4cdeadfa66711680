"""The pure retry policy, table-tested against the spec's Errors part."""

from __future__ import annotations

import pytest
from payops.connectors.payments import delay, should_retry

from tests.connectors.conftest import FixedRandom

NO_RETRY = [
    (400, "invalid_input"),
    (400, "transfer_refused"),
    (401, "unauthenticated"),
    (403, "forbidden"),
    (403, "daily_limit_exceeded"),
    (403, "something_new"),
    (404, "not_found"),
    (404, "product_not_found"),
    (409, "idempotency_key_reused"),
    (409, "duplicate_reference"),
    (409, "reference_reused"),
    (409, "transfer_not_held"),
    (409, "resettlement_not_allowed"),
    (409, "settlement_already_retried"),
    (409, "other_conflict"),
    (422, "amount_out_of_range"),
    (422, "fee_unpriceable"),
    (503, "checkout_unavailable"),
]
RETRY = [
    (429, "rate_limited"),
    (409, "request_in_flight"),
    (500, "internal"),
    (502, "internal"),
    (502, "provider_error"),
    (503, "environment_unknown"),
    (503, "utilities_unavailable"),
    (503, "destination_verification_unavailable"),
    (504, "upstream_timeout"),
    (504, "provider_timeout"),
    (500, None),
    (503, "new_5xx_code"),
]


@pytest.mark.parametrize("status,code", NO_RETRY)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_never_retried(status: int, code: str, method: str) -> None:
    assert not should_retry(status, code, method, 0, max_retries=5)


@pytest.mark.parametrize("status,code", RETRY)
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
def test_retried_until_budget_is_spent(status: int, code: str, method: str) -> None:
    assert should_retry(status, code, method, 0, max_retries=3)
    assert should_retry(status, code, method, 2, max_retries=3)
    assert not should_retry(status, code, method, 3, max_retries=3)


@pytest.mark.parametrize("kind", ["timeout", "connect"])
def test_transport_errors_are_retried(kind: str) -> None:
    assert should_retry(None, None, "POST", 0, max_retries=2, transport_error=kind)
    assert not should_retry(None, None, "POST", 2, max_retries=2, transport_error=kind)


def test_post_without_key_is_not_replayed_when_it_may_have_run() -> None:
    assert not should_retry(500, "internal", "POST", 0, max_retries=3, has_idempotency_key=False)
    assert not should_retry(
        None, None, "POST", 0, max_retries=3, transport_error="timeout", has_idempotency_key=False
    )
    assert should_retry(
        None, None, "POST", 0, max_retries=3, transport_error="connect", has_idempotency_key=False
    )
    assert should_retry(429, "rate_limited", "POST", 0, max_retries=3, has_idempotency_key=False)


@pytest.mark.parametrize("retry_after", ["0", "1", "5", "30"])
def test_429_waits_at_least_retry_after_and_longer_each_time(retry_after: str) -> None:
    for jitter in (0.0, 0.999):
        rng = FixedRandom(jitter)
        waits = [
            delay(a, {"retry-after": retry_after}, rng, status=429, code="rate_limited", base=0.5, cap=30.0)
            for a in range(5)
        ]
        assert all(w >= float(retry_after) for w in waits)
        assert all(later > earlier for earlier, later in zip(waits, waits[1:], strict=False))


def test_429_without_header_backs_off() -> None:
    waits = [delay(a, {}, FixedRandom(0.0), status=429, base=0.5, cap=30.0) for a in range(4)]
    assert waits == [0.5, 1.0, 2.0, 4.0]


def test_5xx_backoff_is_exponential_capped_and_jittered() -> None:
    no_jitter = [delay(a, None, FixedRandom(0.0), status=503, base=0.5, cap=3.0) for a in range(5)]
    assert no_jitter == [0.5, 1.0, 2.0, 3.0, 3.0]
    jittered = [delay(a, None, FixedRandom(1.0), status=503, base=0.5, cap=3.0) for a in range(3)]
    assert jittered == [0.375, 0.75, 1.5]  # up to a quarter is taken off


def test_request_in_flight_waits_shortly() -> None:
    waits = [
        delay(a, None, FixedRandom(0.0), status=409, code="request_in_flight", base=5.0) for a in range(3)
    ]
    assert waits == pytest.approx([0.2, 0.4, 0.6])
