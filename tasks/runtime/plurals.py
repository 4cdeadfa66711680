"""How payops counts things for people: ``1 row``, ``2 rows``, ``1,204 payouts``; never ``row(s)``.

The one rule for every message a person reads (CLI, console, notices, reports, run states); the console's
``count`` filter is this function.
"""

from __future__ import annotations


def noun_for(n: int, noun: str, plural: str | None = None) -> str:
    """``noun`` when ``n`` is 1, else its plural (``plural`` when adding an s will not do)."""
    return noun if n == 1 else plural or noun + "s"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with thousands separators and the noun in agreement: ``1 row``, ``2,000 rows``."""
    return f"{n:,} {noun_for(n, noun, plural)}"
