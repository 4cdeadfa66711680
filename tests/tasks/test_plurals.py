"""Counts for people (tasks/runtime/plurals.py): the noun agrees with the number, thousands are separated."""

from __future__ import annotations

import pytest
from payops.deployments.console.formats import count
from payops.tasks.intake.validation import rows_list
from payops.tasks.runtime.plurals import counted, noun_for


@pytest.mark.parametrize(
    ("n", "noun", "plural", "expected"),
    [
        (0, "row", None, "0 rows"),
        (1, "row", None, "1 row"),
        (2, "payee name", None, "2 payee names"),
        (1_204, "payout", None, "1,204 payouts"),
        (1, "mismatch", "mismatches", "1 mismatch"),
        (3, "mismatch", "mismatches", "3 mismatches"),
    ],
)
def test_counted(n: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(n, noun, plural) == expected
    assert count(n, noun, plural) == expected  # the console's filter is the same rule


def test_row_lists_name_themselves() -> None:
    assert rows_list([4]) == "row 4"
    assert rows_list([3, 4]) == "rows 3, 4"
    assert rows_list(list(range(2, 15))) == "rows 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 3 more"
    assert noun_for(1, "approval") == "approval" and noun_for(2, "approval") == "approvals"
