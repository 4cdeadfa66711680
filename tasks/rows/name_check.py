"""The pre-flight's check of one row's payee name against the account holder's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class NameCheck:
    """One row's name check: the number looked up, the name in the sheet, the holder's name, the verdict."""

    row: int
    destination: str
    sheet_name: str
    holder_name: str | None
    verdict: str  # match, partial, mismatch, unverified
