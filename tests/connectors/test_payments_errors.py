"""The one error map: a class per code of the contract's error catalogue; code, then status, then generic."""

from __future__ import annotations

import httpx
import pytest
from payops.connectors.payments import errors as e

from tests.connectors.contract_tables import contract_error_rows

ROWS = contract_error_rows()
CHOICE_ROWS = contract_error_rows(choices=True)


def _camel(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


def test_contract_error_catalogue_was_read() -> None:
    assert len(ROWS) >= 38
    assert (503, "checkout_unavailable") in ROWS and (403, "limits_unusable") in ROWS


@pytest.mark.parametrize("status,code", ROWS)
def test_every_spec_code_has_its_own_class(status: int, code: str) -> None:
    response = httpx.Response(
        status, json={"error": {"code": code, "message": "m"}}, headers={"Request-Id": "req-9"}
    )
    exc = e.error_from_response(response)
    assert type(exc) is e.ERROR_CLASSES_BY_CODE[(status, code)]
    # The class is specific to the code (its name spells the code), and under the status family.
    assert _camel(code).replace("Internal", "") in type(exc).__name__ or code == "not_found"
    family = {
        400: e.BadRequestError,
        401: e.AuthenticationError,
        403: e.PermissionDeniedError,
        404: e.NotFoundError,
        409: e.ConflictError,
        422: e.UnprocessableEntityError,
        429: e.RateLimitError,
        500: e.InternalServerError,
        502: e.BadGatewayError,
        503: e.ServiceUnavailableError,
        504: e.GatewayTimeoutError,
    }[status]
    assert isinstance(exc, family)
    assert (exc.status, exc.code, exc.message, exc.request_id) == (status, code, "m", "req-9")


@pytest.mark.parametrize("status,code", CHOICE_ROWS)
def test_payops_codes_map_to_their_status_family(status: int, code: str) -> None:
    """Codes payops answers where the spec shows none (open set): the status family's class, code kept."""
    exc = e.error_from_response(httpx.Response(status, json={"error": {"code": code, "message": "m"}}))
    assert isinstance(exc, e.APIStatusError) and type(exc) is not e.APIStatusError
    assert exc.status == status and exc.code == code


def test_classes_are_distinct_per_code() -> None:
    classes = [e.ERROR_CLASSES_BY_CODE[row] for row in ROWS]
    assert len(set(classes)) == len(classes)


@pytest.mark.parametrize(
    "status,code,expected",
    [
        (403, "brand_new_403", e.PermissionDeniedError),
        (409, "another_conflict", e.ConflictError),
        (418, "teapot", e.APIStatusError),
        (599, None, e.InternalServerError),
        (409, "daily_limit_exceeded", e.DailyLimitExceededError),  # code wins over status
    ],
)
def test_unknown_codes_fall_back_to_status_then_generic(
    status: int, code: str | None, expected: type
) -> None:
    payload = {"error": {"code": code, "message": "m"}} if code else {"oops": True}
    exc = e.error_from_response(httpx.Response(status, json=payload))
    assert type(exc) is expected
    assert exc.code == code


def test_non_json_error_body_and_retry_after() -> None:
    exc = e.error_from_response(httpx.Response(429, text="<html>busy</html>", headers={"Retry-After": "7"}))
    assert isinstance(exc, e.RateLimitError) and exc.retry_after == 7.0 and exc.code is None
    assert "429" in str(exc)


def test_parse_retry_after_forms() -> None:
    assert e.parse_retry_after("3") == 3.0
    assert e.parse_retry_after("-2") == 0.0
    assert e.parse_retry_after("garbage") is None
    assert e.parse_retry_after(None) is None
    assert e.parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
