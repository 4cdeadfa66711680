"""The intake's refusal: a whole-file problem, optionally located at cells (no pydantic: the parser child
imports it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Located:
    """Where a whole-file problem sits: the row the operator sees and the column's header text."""

    row: int
    column: str
    value: str = ""


class IntakeError(Exception):
    """The whole file is refused; ``str(e)`` is a message for the operator.

    ``cells`` names the cells the refusal is about when it has any (a formula without a saved value), so a
    JSON summary can fill ``row``/``column`` for each of them.
    """

    def __init__(self, message: str, cells: Sequence[Located] = ()) -> None:
        super().__init__(message)
        self.cells: tuple[Located, ...] = tuple(cells)

    def errors(self) -> list[dict[str, object]]:
        """The refusal as summary ``errors`` entries: one per located cell, else one for the file."""
        message = str(self)
        if not self.cells:
            return [{"row": None, "column": None, "message": message}]
        return [{"row": c.row, "column": c.column, "message": message} for c in self.cells]
