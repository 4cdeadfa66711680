"""A retry's rows that will fail again as they are, and what the person starting it is told of them.

Kept apart from `tasks.payouts.retry_sheet` (which reads and writes workbooks) so the CLI's client of the
payops server prints the warning without loading the report writers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from payops.tasks.runtime.plurals import counted


class FailsAgain(NamedTuple):
    """A row a retry pays that will fail again as it is: its row in the run's sheet, its fresh reference and
    why it failed."""

    row: int | None
    reference: str
    why: str


def fails_again_lines(rows: Sequence[FailsAgain]) -> list[str]:
    """What a person starting a retry is told of its rows that will fail again as they are (none: nothing)."""
    if not rows:
        return []
    many = counted(len(rows), "row")
    lines = [f"warning: {many} will fail again as paid now (correct the sheet, or leave the row out):"]
    lines += [f"  row {r.row if r.row is not None else '?'} ({r.reference}): {r.why}" for r in rows[:20]]
    if len(rows) > 20:
        lines.append(f"  ... and {len(rows) - 20} more")
    return lines
