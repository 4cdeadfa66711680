"""The reference a row is sent under is one rule, `tasks.wire.references.payout_reference`: the wire body, the
approval fingerprint, the paid-before digest and the run reconciliation must agree on it. The checker finds
a copy (``row.reference or row_reference(label, row.row)``) anywhere else."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pytest
from payops.tasks.wire.references import payout_reference, row_reference

from tests.architecture.source_scan import find_in_rooms

ROOMS = ("connectors", "tasks", "flows", "deployments", "store")
HOME = "tasks/wire/references.py"


@dataclass(frozen=True)
class Row:
    row: int
    reference: str | None = None


def test_a_row_keeps_its_own_reference_else_gets_the_labels() -> None:
    assert payout_reference(Row(7, "INV-7"), "payroll") == "INV-7"
    assert payout_reference(Row(7), "payroll") == row_reference("payroll", 7)


def copies(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of every ``<x>.reference or row_reference(...)`` (the rule restated)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)):
            continue
        own = any(isinstance(v, ast.Attribute) and v.attr == "reference" for v in node.values)
        made = any(
            isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", "")) == "row_reference"
            for v in node.values
        )
        if own and made:
            found.append(f"{filename}:{node.lineno}")
    return found


def test_no_copy_of_the_payout_reference_rule() -> None:
    assert find_in_rooms(copies, ROOMS, HOME) == []


@pytest.mark.parametrize(
    "source",
    [
        "fingerprint(row_fields(r, r.reference or row_reference(label, r.row)) for r in rows)\n",
        "ref = row.reference or refs.row_reference(label, row.row)\n",
    ],
)
def test_the_checker_finds_a_copy(source: str) -> None:
    assert copies(source, "synthetic.py")
