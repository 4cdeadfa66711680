"""Rows built from checked values (`tasks.rows.trusted_row`): the intake's and a spill's read-back are the
rows validation would make, and a row read back from a spill costs no more memory than the row the intake
read (a million-row run holds a part of 20,000 of them at a time)."""

from __future__ import annotations

import tracemalloc
from decimal import Decimal
from pathlib import Path

import pytest
from payops.tasks.payouts.spill import RowSpill
from payops.tasks.rows import trusted_row
from payops.tasks.rows.payout_row import PayoutRow


def _rows(n: int) -> list[PayoutRow]:
    """Rows as a payroll has them: every text its own string, the coded fields the same few strings."""
    make = trusted_row.row_constructor()
    return [
        make(
            i + 2,
            f"PAY-{i:05d}" if i % 7 else None,
            Decimal(f"{20 + i % 130}.{i % 100:02d}"),
            "GHS",
            "mtn",
            "msisdn",
            f"23324{i:07d}",
            f"Ama Mensah {i}" if i % 5 else None,
            f"May payroll {i}" if i % 3 else None,
            {"Department": f"Ops {i}"} if i % 2 else {},
        )
        for i in range(n)
    ]


def _read_back(tmp_path: Path, rows: list[PayoutRow]) -> list[PayoutRow]:
    with RowSpill(tmp_path / "spill.sqlite3") as spill:
        spill.append(rows, [r.destination for r in rows])
        return list(spill.rows())


def test_rows_read_back_are_the_rows_validation_makes(tmp_path: Path) -> None:
    rows = _rows(60)
    back = _read_back(tmp_path, rows)
    assert back == rows
    for row in back:
        assert PayoutRow.model_validate(row.model_dump()) == row
        assert row.model_dump(exclude_unset=True) == row.model_dump()  # every field counts as given
        assert row.model_copy(update={"note": "June"}).note == "June"


def test_model_construct_stands_in_when_the_slots_change(tmp_path: Path, monkeypatch) -> None:
    rows = _rows(10)
    monkeypatch.setattr(trusted_row, "slot_setters_work", lambda: False)
    assert trusted_row.row_constructor() is not trusted_row._slot_construct
    assert _read_back(tmp_path, rows) == rows


def test_a_row_read_back_costs_what_the_row_read_did(tmp_path: Path) -> None:
    n = 4_000
    with RowSpill(tmp_path / "spill.sqlite3") as spill:
        spill.append(_rows(n), [f"23324{i:07d}" for i in range(n)])
        tracemalloc.start()
        try:
            made = tracemalloc.get_traced_memory()[0]
            built = _rows(n)
            built_bytes = tracemalloc.get_traced_memory()[0] - made
            del built
            made = tracemalloc.get_traced_memory()[0]
            back = list(spill.rows())
            back_bytes = tracemalloc.get_traced_memory()[0] - made
        finally:
            tracemalloc.stop()
    assert len(back) == n
    # model_construct gave each row its own set of field names: about 420 bytes on top of ~1 KB a row.
    assert back_bytes <= built_bytes * 1.1, (back_bytes / n, built_bytes / n)


@pytest.mark.parametrize("field", ["amount", "extra"])
def test_read_back_values_keep_their_types(tmp_path: Path, field: str) -> None:
    row = _rows(2)[1]
    (back,) = _read_back(tmp_path, [row])
    assert type(getattr(back, field)) is type(getattr(row, field))
    assert getattr(back, field) == getattr(row, field)
