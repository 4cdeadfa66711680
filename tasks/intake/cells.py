"""Turning a cell as read (calamine value or csv text) into the text the operator meant."""

from __future__ import annotations

import datetime as dt

STRIP_CHARS = "".join(ch for ch in map(chr, range(0x3001)) if ch.isspace()) + "\u200b\u2060\ufeff"
"""Trimmed from both ends of every cell: all Unicode spaces (incl. non-breaking) and zero-width spaces."""


def clean_text(value: str) -> str:
    """Trim whitespace, non-breaking and zero-width spaces from both ends."""
    return value.strip(STRIP_CHARS)


def float_text(value: float) -> str:
    """Text for a numeric cell.

    Excel stores every number as a float, so calamine yields ``241234567.0`` for a typed ``241234567``:
    integer-valued floats become digits. Other values use the shortest repr that round-trips (what was
    typed, or a float artefact such as ``0.30000000000000004`` that validation then refuses). From 1e15 up
    Excel keeps only 15 significant digits, so such numbers are shown in scientific notation, which
    validation refuses.
    """
    if value != value or value in (float("inf"), float("-inf")):
        return repr(value)
    magnitude = abs(value)
    if magnitude >= 1e15:
        return format(value, ".15g")
    if value.is_integer():
        return str(int(value))
    return repr(value)


def cell_text(value: object) -> str:
    """Text of any cell value python-calamine returns (str, float, int, bool, date/time types)."""
    kind = type(value)
    if kind is str:
        return clean_text(value)  # type: ignore[arg-type]
    if kind is float:
        return float_text(value)  # type: ignore[arg-type]
    if kind is bool:
        return "TRUE" if value else "FALSE"
    if kind is int:
        return float_text(float(value)) if abs(value) >= 10**15 else str(value)  # type: ignore[arg-type]
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if value is None:
        return ""
    return clean_text(str(value))


def shorten(text: str, limit: int = 60) -> str:
    """Cut long cell text for messages: ``"aaaa…(10000 characters)"``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} characters)"
