"""Payout sheets for the benchmarks (and the flow tests): realistic rows, written with openpyxl."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from openpyxl import Workbook

HEADERS = [
    "reference",
    "payee name",
    "amount",
    "currency",
    "provider",
    "destination type",
    "destination",
    "note",
]
TEST_ENDINGS = {"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0404", "0502", "0504"}
"""Destination endings the emulator treats as test values (failures, review): kept out of plain rows."""


def payroll_rows(n: int, *, prefix: str = "T", specials: dict[int, str] | None = None) -> list[list[str]]:
    """`n` valid rows; `specials` maps a 0-based index to the destination's last four digits (test values)."""
    specials = specials or {}
    rows = []
    for i in range(n):
        dest = f"23324{i:07d}"
        if dest[-4:] in TEST_ENDINGS:
            dest = dest[:-4] + "9999"
        if i in specials:
            dest = dest[:-4] + specials[i]
        rows.append([f"{prefix}-{i:05d}", "", f"{10 + i % 7}.50", "GHS", "mtn", "msisdn", dest, f"pay {i}"])
    return rows


def write_sheet(path: Path, rows: Iterable[list[str]], headers: list[str] = HEADERS) -> Path:
    wb = Workbook(write_only=True)
    ws = wb.create_sheet("payouts")
    ws.append(headers)
    for r in rows:
        ws.append(r)
    wb.save(path)
    return path
