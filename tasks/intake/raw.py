"""A sheet's cells as text, column by column: what the readers (and the parser child) hand to validation."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass
class RawSheet:
    """Cells as text, column by column, blank rows already dropped: what the readers hand to validation."""

    sheet: str | None
    columns: list[str]
    data: list[list[str]]
    """One list per column, one text per data row."""
    row_numbers: list[int]
    numeric: dict[int, Collection[int]] = field(default_factory=dict)
    """column index → positions of the cells the workbook stored as numbers."""
    header_row: int = 1
    joined: list[str | None] | None = None
    """Per column, its texts joined by line breaks (None when a text holds one); computed when absent."""
    sheet_columns: list[int] | None = None
    """Per column, its position in the sheet or csv line (0 = A); None when not known."""


def joined_lines(texts: list[str]) -> str | None:
    """The texts joined by line breaks, or None when a text itself holds one."""
    joined = "\n".join(texts)
    return joined if joined.count("\n") == len(texts) - 1 else None
