"""Header matching: which sheet column holds which payout field.

Headers match ignoring case, spaces, ``_``, ``-`` and ``.``, and a trailing parenthesised hint
(``Amount (GHS)`` matches ``amount``). Columns matching nothing are kept as ``extra`` and carried into
reports.

=================  ========  =============================================================================
field              required  header aliases
=================  ========  =============================================================================
reference          no        reference, ref, payout reference, payment reference
amount             yes       amount, payout amount
currency           yes [1]_  currency, ccy, currency code
provider           yes       provider, network, bank, mobile network
destination_type   no [2]_   destination type, type, dest type
destination        yes       destination, phone, msisdn, mobile, mobile number, phone number,
                             account number, wallet number, mobile money number, momo number, account,
                             wallet
payee_name         no        payee name, name, payee, recipient, recipient name, beneficiary,
                             beneficiary name, account name
note               no        note, notes, narration, description, memo
=================  ========  =============================================================================

.. [1] may be left out when ``IntakeOptions.default_currency`` is set (blank cells take the default too).
.. [2] defaults from the provider: ``msisdn`` for mobile money, ``account`` for banks, ``card`` for card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .models import IntakeError

FIELDS: tuple[str, ...] = (
    "reference",
    "amount",
    "currency",
    "provider",
    "destination_type",
    "destination",
    "payee_name",
    "note",
)

ALIASES: dict[str, tuple[str, ...]] = {
    "reference": ("reference", "ref", "payout reference", "payment reference"),
    "amount": ("amount", "payout amount"),
    "currency": ("currency", "ccy", "currency code"),
    "provider": ("provider", "network", "bank", "mobile network"),
    "destination_type": ("destination type", "type", "dest type"),
    "destination": (
        "destination",
        "phone",
        "msisdn",
        "mobile",
        "mobile number",
        "phone number",
        "account number",
        "wallet number",
        "mobile money number",
        "momo number",
        "account",
        "wallet",
    ),
    "payee_name": (
        "payee name",
        "name",
        "payee",
        "recipient",
        "recipient name",
        "beneficiary",
        "beneficiary name",
        "account name",
    ),
    "note": ("note", "notes", "narration", "description", "memo"),
}

_SEPARATORS = re.compile(r"[\s_\-.]+")
_TRAILING_HINT = re.compile(r"\s*\([^)]*\)\s*$")
_KEY_TO_FIELD: dict[str, str] = {}


def header_key(text: str) -> str:
    """Normalise a header for matching: ``" Phone_Number (mobile)"`` → ``"phone number"``."""
    text = _TRAILING_HINT.sub("", text.replace("\xa0", " ").strip())
    return _SEPARATORS.sub(" ", text.lower()).strip()


for _field, _aliases in ALIASES.items():
    for _alias in _aliases:
        _KEY_TO_FIELD[header_key(_alias)] = _field


def field_for_header(text: str) -> str | None:
    """The payout field a header names, or ``None`` for an unknown (extra) column."""
    return _KEY_TO_FIELD.get(header_key(text))


@dataclass(frozen=True)
class ColumnMap:
    """Positions (in the sheet's column list) of the known fields and of the extra columns."""

    fields: dict[str, int]
    extras: list[int]


def map_columns(columns: list[str], *, currency_defaulted: bool) -> ColumnMap:
    """Match headers to fields; raise :class:`IntakeError` for duplicates or missing required columns."""
    fields: dict[str, int] = {}
    extras: list[int] = []
    seen_text: dict[str, int] = {}
    for index, header in enumerate(columns):
        folded = header.casefold()
        if folded in seen_text:
            raise IntakeError(f"the header {header!r} appears twice; give every column its own header")
        seen_text[folded] = index
        name = field_for_header(header)
        if name is None:
            extras.append(index)
        elif name in fields:
            raise IntakeError(
                f"columns {columns[fields[name]]!r} and {header!r} both mean {name.replace('_', ' ')}; "
                "keep only one"
            )
        else:
            fields[name] = index
    required = ["amount", "currency", "provider", "destination"]
    if currency_defaulted:
        required.remove("currency")
    missing = [name for name in required if name not in fields]
    if missing:
        found = ", ".join(repr(c) for c in columns) or "none"
        raise IntakeError(
            f"missing required column(s): {', '.join(missing)} (headers found: {found}); "
            "see docs/intake.md for accepted header names"
        )
    return ColumnMap(fields=fields, extras=extras)
