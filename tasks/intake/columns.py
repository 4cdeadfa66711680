"""Header matching: which sheet column holds which payout field, and the sheet's currency.

Headers match ignoring case, spaces, ``_``, ``-``, ``.``, spaces around ``/`` and a trailing parenthesised
hint (``Amount (GHS)`` matches ``amount``; ``Bank / Network`` matches ``bank/network``). :data:`ALIASES` is
the one list of accepted headers per field (docs/intake.md's table is checked against it by
tests/tasks/intake/test_header_aliases.py). Columns matching nothing are kept as ``extra`` and carried into
reports. Required: amount, currency (see below), provider, destination.

An explicit mapping (``IntakeOptions.column_map``, ``Header=field`` entries: `parse_column_map`) names the
column of a field when the sheet's header is none of these, or picks one of two headers meaning the same
field; it wins over the aliases, and a header an alias would have given that field is then ignored
(``Header=none`` ignores a header an alias would map). Every
header that ends up mapped to no field is an ignored column (`ColumnMap.ignored`), listed by `payops check`,
the console preview and the run summary.

**The sheet's currency** (`ColumnMap.currency`). A currency column wins; its blank cells take the currency
chosen for the sheet (``IntakeOptions.default_currency``). A sheet without one takes its currency from the
amount column's header (`header_currency`: ``Net Pay (GHS)``, ``Amount GHS``, ``Amount in GHS``), else from
the chosen one; a header naming another currency than the chosen one refuses the sheet.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from payops.tasks.runtime.plurals import noun_for

from .models import IntakeError

if TYPE_CHECKING:
    from .options import IntakeOptions


class ColumnsUnmatched(IntakeError):
    """The sheet's headers do not give every required field one column: ``headers`` (in sheet order) and
    the ``fields`` left without one, so a person can say which header holds which (the console's mapping
    step, ``--column``)."""

    def __init__(
        self, message: str, headers: list[str], fields: list[str], guessed: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.headers = tuple(headers)
        self.fields = tuple(fields)
        self.guessed = dict(guessed or {})
        """``{field: header}`` matched before the problem was found (what a mapping form pre-selects)."""


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

REQUIRED: tuple[str, ...] = ("amount", "currency", "provider", "destination")
"""Fields every sheet gives a column (the currency may come from the amount header or be chosen instead)."""

ALIASES: dict[str, tuple[str, ...]] = {
    # "Employee ID", "Staff ID" stay extra columns: an employee is on every month's run (and may be on two
    # rows of one, salary and bonus), so their ID is no payout reference (docs/intake.md says more).
    "reference": ("reference", "ref", "payout reference", "payment reference"),
    "amount": (
        "amount",
        "payout amount",
        "net pay",
        "net salary",
        "net amount",
        "amount due",
        "amount payable",
        "pay amount",
        "salary",
    ),
    "currency": ("currency", "ccy", "currency code"),
    "provider": (
        "provider",
        "network",
        "bank",
        "mobile network",
        "bank/network",
        "bank or network",
        "network provider",
        "momo network",
        "mobile money network",
        "provider name",
        "bank name",
    ),
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
        "phone no",
        "mobile no",
        "account no",
        "account/phone number",
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
_SLASH = re.compile(r"\s*/\s*")
_TRAILING_HINT = re.compile(r"\s*\([^)]*\)\s*$")
_KEY_TO_FIELD: dict[str, str] = {}


def header_key(text: str) -> str:
    """Normalise a header for matching: ``" Phone_Number (mobile)"`` → ``"phone number"``."""
    text = _TRAILING_HINT.sub("", text.replace("\xa0", " ").strip())
    return _SLASH.sub("/", _SEPARATORS.sub(" ", text.lower()).strip())


for _field, _aliases in ALIASES.items():
    for _alias in _aliases:
        _KEY_TO_FIELD[header_key(_alias)] = _field


def field_for_header(text: str) -> str | None:
    """The payout field a header names, or ``None`` for an unknown (extra) column."""
    return _KEY_TO_FIELD.get(header_key(text))


_CODE_IN_PARENS = re.compile(r"\(\s*([A-Za-z]{3})\s*\)\s*$")
_CODE_AS_LAST_WORD = re.compile(r"\S[\s_\-.]+([A-Za-z]{3})\s*$")


def header_currency(header: str, known: Collection[str]) -> str | None:
    """The currency an amount header names, or ``None``: a 3-letter code in a trailing parenthesis or as its
    last word (``Net Pay (GHS)``, ``Amount GHS``, ``Montant (XOF)``, ``Amount in GHS``) that is one of
    ``known`` (any case). With ``known`` empty (any currency accepted), a code written in capitals: in a
    parenthesis, or as the last word after words that are not all capitals (``NET PAY`` names none).

    A parenthesised code in capitals that is not in ``known`` (``Amount (USD)``) refuses the sheet, naming it
    and what is allowed: its amounts are in a currency payops would not pay them in."""
    if match := _CODE_IN_PARENS.search(header):
        letters = match.group(1)
        code = letters.upper()
        if code in known or (not known and letters.isupper()):
            return code
        if letters.isupper():
            raise IntakeError(
                f"the amount header {header!r} names the currency {code}, which is not supported "
                f"(supported: {', '.join(sorted(known))})"
            )
        return None
    if match := _CODE_AS_LAST_WORD.search(header):
        letters = match.group(1)
        code = letters.upper()
        if code in known:
            return code
        before = header[: match.start(1)]
        if not known and letters.isupper() and before != before.upper():
            return code
    return None


def currency_note(code: str, header: str | None) -> str:
    """Where the sheet's currency came from, as the check, the preview and the run summary say it."""
    where = f"from the header {header!r}" if header else "chosen for the sheet"
    return f"currency {code} ({where})"


@dataclass(frozen=True)
class ColumnMap:
    """Positions (in the sheet's column list) of the known fields and of the extra columns, and the sheet's
    currency: the code rows without a currency cell take (``None``: every row has its own), and the amount
    header it was read from (``None``: chosen, ``IntakeOptions.default_currency``)."""

    fields: dict[str, int]
    extras: list[int]
    currency: str | None = None
    currency_header: str | None = None

    def headers(self, columns: list[str]) -> dict[str, str]:
        """Each mapped field's header text, in field order."""
        return {name: columns[self.fields[name]] for name in FIELDS if name in self.fields}

    def ignored(self, columns: list[str]) -> list[str]:
        """The headers mapped to no field, in sheet order (kept in reports, never paid from)."""
        return [columns[i] for i in self.extras]


class ColumnMapError(ValueError):
    """A column mapping that cannot be read (the message names the entry and what is allowed)."""


NO_FIELD = "none"
"""The field of an explicit mapping entry that ignores its column (``Type=none``)."""

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
        if name not in FIELDS and name != NO_FIELD:
            raise ColumnMapError(
                f"column mapping {entry.strip()!r}: {name!r} is not a field "
                f"(fields: {', '.join(FIELDS)}; {NO_FIELD} ignores the column)"
            )
        if header_key(header) in {header_key(h) for h in mapping}:
            raise ColumnMapError(f"column mapping names the header {header!r} twice")
        if name != NO_FIELD and name in mapping.values():
            raise ColumnMapError(f"column mapping gives {name} two columns; keep only one")
        mapping[header] = name
    return mapping


def format_column_map(mapping: dict[str, str]) -> str:
    """The mapping as one line (`parse_column_map` reads it back), entries sorted so equal maps are equal."""
    return "; ".join(f"{h}={f}" for h, f in sorted(mapping.items()))


def mapping_from_choices(
    columns: list[str], chosen: dict[str, str], previous: dict[str, str] | None = None
) -> dict[str, str]:
    """The explicit mapping a mapping form's choices mean: ``chosen`` ``{field: header, or "" for none}`` for
    the fields the form showed; ``previous`` entries of fields it did not show are kept. An entry is written
    only where the aliases would read the sheet otherwise: a header no alias gives that field (or one of
    several that do), or ``Header=none`` for a field left without a column that an alias would give one."""
    by_alias: dict[str, list[str]] = {}
    for header in columns:
        if (name := field_for_header(header)) is not None:
            by_alias.setdefault(name, []).append(header)
    mapping = {h: f for h, f in (previous or {}).items() if f not in chosen and f != NO_FIELD}
    picked = {h for h in chosen.values() if h}
    for name, header in chosen.items():
        if header and by_alias.get(name) != [header]:
            mapping[header] = name
        elif not header:
            mapping |= {h: NO_FIELD for h in by_alias.get(name, []) if h not in picked}
    return mapping


def sheet_columns(columns: list[str], options: IntakeOptions) -> ColumnMap:
    """`map_columns` with the options' explicit mapping, chosen currency and known currencies: what every
    reader of a payout sheet (whole or streamed) calls."""
    return map_columns(
        columns,
        explicit=options.column_map,
        currency=options.default_currency,
        known_currencies=options.known_currencies,
    )


def map_columns(
    columns: list[str],
    *,
    explicit: dict[str, str] | None = None,
    currency: str | None = None,
    known_currencies: Collection[str] = (),
) -> ColumnMap:
    """Match headers to fields (``explicit`` ``{header: field}`` first, then the aliases) and settle the
    sheet's currency (``currency``: the one chosen for it; see the module's docstring); raise
    :class:`IntakeError` for duplicates, a mapped header the sheet lacks, missing required columns, or an
    amount header naming another currency than the chosen one."""
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
        if name is None or name == NO_FIELD:
            extras.append(index)
        elif name in fields:
            raise ColumnsUnmatched(
                f"columns {columns[fields[name]]!r} and {header!r} both mean {name.replace('_', ' ')}; "
                f"keep only one, or {_MAPPING_HINT}",
                columns,
                [name],
                {f: columns[i] for f, i in fields.items()},
            )
        else:
            fields[name] = index
    from_header = None
    if "currency" not in fields and "amount" in fields:
        amount_header = columns[fields["amount"]]
        code = header_currency(amount_header, known_currencies)
        if code is not None and currency is not None and code != currency:
            raise ColumnsUnmatched(
                f"the amount header {amount_header!r} says the currency is {code}, but {currency} was "
                f"chosen for the sheet; choose {code}, or rename the header",
                columns,
                ["currency"],
                {f: columns[i] for f, i in fields.items()},
            )
        if code is not None:
            currency, from_header = code, amount_header
    missing = [name for name in REQUIRED if name not in fields and (name != "currency" or currency is None)]
    if missing:
        found = ", ".join(repr(c) for c in columns) or "none"
        choose = (
            "; name the currency in the amount header (Amount (GHS)) or choose it for the sheet"
            if "currency" in missing
            else ""
        )
        raise ColumnsUnmatched(
            f"missing required {noun_for(len(missing), 'column')}: {', '.join(missing)} "
            f"(headers found: {found}){choose}; "
            f"see docs/intake.md for accepted header names, or {_MAPPING_HINT}",
            columns,
            missing,
            {f: columns[i] for f, i in fields.items()},
        )
    return ColumnMap(fields=fields, extras=extras, currency=currency, currency_header=from_header)
