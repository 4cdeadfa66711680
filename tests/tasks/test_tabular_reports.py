"""The JSON of a table report: what ``json.dump(indent=2, default=str)`` writes, a chunk of rows at a time."""

from __future__ import annotations

import enum
import io
import json
from datetime import datetime
from decimal import Decimal

import pytest
from payops.tasks.reports import tabular_reports
from payops.tasks.reports.tabular_reports import write_json_document


class Kind(enum.StrEnum):
    PAYOUT = "payout"


HEADERS = ["n", "text", "amount", "at"]
ROWS = [
    (1, 'a "quoted"\nline, é', Decimal("-2.00"), datetime(2026, 1, 1, 1, 2, 3, 5)),
    (2, None, None, None),
    (3, Kind.PAYOUT, Decimal("1E+2"), datetime(2026, 1, 1)),
]
HEAD = {
    "status": "balanced",
    "transactions": 3,  # the rows' key already in the summary (the close's count) keeps its place
    "kind": Kind.PAYOUT,
    "at": datetime(2026, 1, 1, 1, 2, 3),
    "total": Decimal("1.50"),
    "by": {"x": [1, 2, {"y": None}], 7: "int key"},
}


@pytest.mark.parametrize("rows", [ROWS * 1000, ROWS[:1], []], ids=["chunks", "one", "none"])
@pytest.mark.parametrize("head", [HEAD, {k: v for k, v in HEAD.items() if k != "transactions"}])
def test_the_document_is_what_json_dump_writes(
    rows: list, head: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tabular_reports, "_JSON_ROWS_PER_WRITE", 7)  # many chunks, the last one short
    out = io.BytesIO()
    write_json_document(out, head, "transactions", HEADERS, rows)
    expected = {**head, "transactions": [dict(zip(HEADERS, r, strict=True)) for r in rows]}
    assert out.getvalue().decode() == json.dumps(expected, indent=2, default=str, ensure_ascii=False)
