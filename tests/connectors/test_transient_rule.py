"""Which failures pass (429, 5xx, the service out of reach) is one rule, `PaymentsError.transient`
(connectors/payments/errors.py): the client's retries, the tasks' retries and the purchases' "error or
refused" all read it. The checker finds a copy of it (a status compared with 500) elsewhere."""

from __future__ import annotations

import ast

import pytest
from payops.connectors.payments import APIConnectionError, APITimeoutError, PaymentsError
from payops.connectors.payments.errors import APIResponseValidationError, error_class_for

from tests.architecture.source_scan import find_in_rooms

ROOMS = ("connectors", "tasks", "flows")
HOME = "connectors/payments/errors.py"
SERVER_FAILED = 500  # the 5xx boundary; 429 alone is also the rate limit's congestion signal and Retry-After


@pytest.mark.parametrize(
    ("status", "transient"),
    [(400, False), (401, False), (403, False), (404, False), (409, False), (422, False), (429, True),
     (500, True), (502, True), (503, True), (504, True), (599, True)],
)  # fmt: skip
def test_a_status_error_is_transient_for_429_and_5xx_only(status: int, transient: bool) -> None:
    error = error_class_for(status, None)("boom", status=status)
    assert error.transient is transient


def test_an_unreachable_service_is_transient_and_a_malformed_answer_is_not() -> None:
    assert APIConnectionError("refused").transient and APITimeoutError("slow").transient
    assert not APIResponseValidationError("bad body", status=200, request_id=None).transient
    assert not PaymentsError("other").transient


def copies(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of every comparison of a status with 500 (the transient rule restated)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        numbers = {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, int)}
        named = any(
            (isinstance(s, ast.Name) and "status" in s.id)
            or (isinstance(s, ast.Attribute) and "status" in s.attr)
            for s in sides
        )
        if named and SERVER_FAILED in numbers:
            found.append(f"{filename}:{node.lineno}")
    return found


def test_no_copy_of_the_transient_rule() -> None:
    assert find_in_rooms(copies, ROOMS, HOME) == []


@pytest.mark.parametrize(
    "source",
    [
        "transient = exc.status is None or exc.status >= 500 or exc.status == 429\n",
        "if status >= 500:\n    retry()\n",
        "level = DEBUG if response.status_code < 500 else WARNING\n",
    ],
)
def test_the_checker_finds_a_copy(source: str) -> None:
    assert copies(source, "synthetic.py")
