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
                             beneficiary name, account name, full name, employee name, staff name,
                             beneficiary full name, account holder, account holder name, holder name,
                             customer name, supplier name, vendor name
note               no        note, notes, narration, description, memo
=================  ========  =============================================================================

.. [1] may be left out when ``IntakeOptions.default_currency`` is set (blank cells take the default too).
.. [2] defaults from the provider: ``msisdn`` for mobile money, ``account`` for banks, ``card`` for card.

An explicit mapping (``IntakeOptions.column_map``, ``Header=field`` entries: `parse_column_map`) names the
column of a field when the sheet's header is none of these, or picks one of two headers meaning the same
field; it wins over the aliases, and a header an alias would have given that field is then ignored. Every
header that ends up mapped to no field is an ignored column (`ColumnMap.ignored`), listed by `payops check`,
the console preview and the run summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .models import IntakeError


class ColumnsUnmatched(IntakeError):
    """The sheet's headers do not give every required field one column: ``headers`` (in sheet order) and
    the ``fields`` left without one, so a person can say which header holds which (the console's mapping
    step, ``--column``)."""

    def __init__(self, message: str, headers: list[str], fields: list[str]) -> None:
        super().__init__(message)
        self.headers = tuple(headers)
        self.fields = tuple(fields)

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
        "full name",
        "employee name",
        "staff name",
        "beneficiary full name",
        "account holder",
        "account holder name",
        "holder name",
        "customer name",
        "supplier name",
        "vendor name",
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

    def headers(self, columns: list[str]) -> dict[str, str]:
        """Each mapped field's header text, in field order."""
        return {name: columns[self.fields[name]] for name in FIELDS if name in self.fields}

    def ignored(self, columns: list[str]) -> list[str]:
        """The headers mapped to no field, in sheet order (kept in reports, never paid from)."""
        return [columns[i] for i in self.extras]


class ColumnMapError(ValueError):
    """A column mapping that cannot be read (the message names the entry and what is allowed)."""


_MAPPING_HINT = 'map a column with --column "Header=field" (fields: ' + ", ".join(FIELDS) + ")"


def parse_column_map(text: str) -> dict[str, str]:
    """``"Full Name=payee_name; Staff Mobile=destination"`` (``;`` or line breaks between entries) as
    ``{header: field}``. Fields are written as in :data:`FIELDS` (``payee name`` is accepted)."""
    mapping: dict[str, str] = {}
    for entry in re.split(r"[;\n]", text or ""):
        if not entry.strip():
            continue
        header, sep, name = entry.rpartition("=")
        header, name = header.strip(), "_".join(name.strip().lower().replace("-", " ").split())
        if not sep or not header:
            raise ColumnMapError(f"column mapping {entry.strip()!r} is not Header=field; {_MAPPING_HINT}")
        if name not in FIELDS:
            raise ColumnMapError(
                f"column mapping {entry.strip()!r}: {name!r} is not a field (fields: {', '.join(FIELDS)})"
            )
        if header_key(header) in {header_key(h) for h in mapping}:
            raise ColumnMapError(f"column mapping names the header {header!r} twice")
        if name in mapping.values():
            raise ColumnMapError(f"column mapping gives {name} two columns; keep only one")
        mapping[header] = name
    return mapping


def format_column_map(mapping: dict[str, str]) -> str:
    """The mapping as one line (`parse_column_map` reads it back), entries sorted so equal maps are equal."""
    return "; ".join(f"{h}={f}" for h, f in sorted(mapping.items()))


def map_columns(
    columns: list[str], *, currency_defaulted: bool, explicit: dict[str, str] | None = None
) -> ColumnMap:
    """Match headers to fields (``explicit`` ``{header: field}`` first, then the aliases); raise
    :class:`IntakeError` for duplicates, a mapped header the sheet lacks, or missing required columns."""
    fields: dict[str, int] = {}
    extras: list[int] = []
    seen_text: dict[str, int] = {}
    for index, header in enumerate(columns):
        folded = header.casefold()
        if folded in seen_text:
            raise IntakeError(f"the header {header!r} appears twice; give every column its own header")
        seen_text[folded] = index
    by_key = {header_key(h): i for i, h in enumerate(columns)}
    chosen: dict[int, str] = {}
    for header, name in (explicit or {}).items():
        index = by_key.get(header_key(header))
        if index is None:
            found = ", ".join(repr(c) for c in columns) or "none"
            raise ColumnsUnmatched(
                f"the column mapping names {header!r}, which is not a header of this sheet "
                f"(headers: {found})",
                columns,
                [name],
            )
        chosen[index] = name
    claimed = set(chosen.values())
    for index, header in enumerate(columns):
        name = chosen.get(index)
        if name is None:
            name = field_for_header(header)
            if name in claimed:
                name = None  # the explicit mapping chose another column for this field
        if name is None:
            extras.append(index)
        elif name in fields:
            raise ColumnsUnmatched(
                f"columns {columns[fields[name]]!r} and {header!r} both mean {name.replace('_', ' ')}; "
                f"keep only one, or {_MAPPING_HINT}",
                columns,
                [name],
            )
        else:
            fields[name] = index
    required = ["amount", "currency", "provider", "destination"]
    if currency_defaulted:
        required.remove("currency")
    missing = [name for name in required if name not in fields]
    if missing:
        found = ", ".join(repr(c) for c in columns) or "none"
        raise ColumnsUnmatched(
            f"missing required column(s): {', '.join(missing)} (headers found: {found}); "
            f"see docs/intake.md for accepted header names, or {_MAPPING_HINT}",
            columns,
            missing,
        )
    return ColumnMap(fields=fields, extras=extras)
