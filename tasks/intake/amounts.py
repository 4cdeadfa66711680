"""Amount parsing: text → ``Decimal`` with at most two decimals, never rounded, never a float."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from .cells import shorten


class CellError(ValueError):
    """A cell value is not acceptable; ``str(e)`` is the operator message."""


CENT = Decimal("0.01")
_FAST = re.compile(r"^\d{1,15}(?:\.\d{1,2})?$")
_PLAIN = re.compile(r"^\d+(?:\.\d+)?$|^\.\d+$")
_GROUPED = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_COMMA_DECIMAL = re.compile(r"^\d{1,3}(?:\.\d{3})+(?:,\d+)?$|^\d+,\d{1,2}$")
_SCIENTIFIC = re.compile(r"^[+-]?(?:\d+[.,]?\d*|[.,]\d+)[eE][+-]?\d+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$|^\d{1,2}:\d{2}(?::\d{2})?$")
_AFFIX = re.compile(r"^(?P<pre>[^\d.,+\-−(]*?)\s*(?P<num>[+\-−(]?[\d.,eE+\-−]*\)?)\s*(?P<suf>[^\d.,)]*)$")

CURRENCY_SYMBOLS: dict[str, str] = {
    "GH₵": "GHS",
    "GH¢": "GHS",
    "GHS": "GHS",
    "₵": "GHS",
    "¢": "GHS",
    "US$": "USD",
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "₦": "NGN",
}
"""Currency marks accepted inside an amount cell; any three-letter code is accepted as itself."""


def looks_like_date(text: str) -> bool:
    """True for the ISO text calamine gives for a date- or time-formatted cell."""
    return bool(_DATE.match(text))


def _currency_of(mark: str) -> str:
    token = mark.strip().upper().replace(" ", "")
    if not token:
        return ""
    if token in CURRENCY_SYMBOLS:
        return CURRENCY_SYMBOLS[token]
    if re.fullmatch(r"[A-Z]{3}", token):
        return token
    raise CellError(f"unexpected text {mark.strip()!r} in the amount; write a number such as 1234.50")


def parse_amount(text: str, *, numeric_cell: bool = False) -> tuple[Decimal, str | None]:
    """Parse an amount cell; return ``(amount with 2 decimals, currency written in the cell or None)``.

    Accepts ``1234.5``, ``1,234.50``, ``GH₵ 10.00``, ``GHS 10``, ``10 GHS``. Refuses blanks, zero, negatives,
    comma decimals (``1.234,50``), scientific notation, dates and more than two decimals (never rounded).
    ``numeric_cell`` says the sheet stored a number (used for friendlier messages about float artefacts).
    """
    if _FAST.match(text):
        value = Decimal(text)
        if not value:
            raise CellError("the amount must be greater than 0")
        return value.quantize(CENT), None
    if not text:
        raise CellError("the amount is required")
    if looks_like_date(text):
        raise CellError(
            f"the amount shows as a date ({text}): the cell is formatted as a date; "
            "format the amount column as Number and type the amount again"
        )
    match = _AFFIX.match(text)
    if not match:
        raise CellError(f"{shorten(text)!r} is not an amount; write a number such as 1234.50")
    hint = _currency_of(match["pre"]) or _currency_of(match["suf"]) or None
    if match["pre"].strip() and match["suf"].strip():
        raise CellError(f"{shorten(text)!r} is not an amount; write a number such as 1234.50")
    number = match["num"].replace("−", "-")
    if number.startswith(("-", "(")) or number.endswith("-"):
        raise CellError("the amount must be positive")
    number = number.lstrip("+")
    if _SCIENTIFIC.match(number):
        raise CellError(
            f"the amount {text!r} is in scientific notation; format the column as Number with 2 decimals "
            "and type the amount again"
        )
    if _PLAIN.match(number):
        pass
    elif _GROUPED.match(number):
        number = number.replace(",", "")
    elif _COMMA_DECIMAL.match(number):
        raise CellError(
            f"the amount {text!r} uses a comma for decimals; write it with a dot, e.g. 1234.50 or 1,234.50"
        )
    else:
        raise CellError(f"{shorten(text)!r} is not an amount; write a number such as 1234.50")
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # the regexes make this unreachable; keep the message anyway
        raise CellError(f"{shorten(text)!r} is not an amount") from exc
    if value != value.quantize(CENT):
        hint_text = (
            " (Excel may display it rounded: round it in the sheet, e.g. =ROUND(…, 2), or type the value)"
            if numeric_cell
            else ""
        )
        raise CellError(f"the amount {text!r} has more than 2 decimals; amounts are never rounded{hint_text}")
    if value.adjusted() >= 15:
        raise CellError(f"the amount {shorten(text)!r} is too large")
    if not value:
        raise CellError("the amount must be greater than 0")
    return value.quantize(CENT), hint
