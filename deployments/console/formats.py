"""How the console writes numbers for people: one amount format (`money`) and counted nouns (`count`), the
Jinja filters every template uses."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money_text


def money(value: Decimal | str | int | None, currency: str = "") -> str:
    """An amount as people read it everywhere in the console (`money_text`: ``GHS 1,071,950.20``); a cell
    that is not an amount (a sheet's typo in a retry preview) is shown as written. Never a float."""
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        raise TypeError("money is a Decimal or a decimal string, never a float")
    try:
        return money_text(Decimal(value), currency)
    except (InvalidOperation, ValueError):
        return f"{currency} {value}".strip()


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, plural unless ``n`` is 1: ``1 row``, ``2 rows``, ``2 payees`` (``plural`` when
    adding an s will not do): `tasks.runtime.plurals.counted`, the one rule."""
    return counted(n, noun, plural)
