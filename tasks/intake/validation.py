"""Row validation: every field of every row checked, every problem located by row and column.

The sheet is checked column by column, one method of :class:`_SheetCheck` per column: each distinct cell
text is parsed once (providers, currencies, types and often amounts repeat) with compiled regexes, and valid
rows are built without validating them again. The measured shortcuts (whole-column regexes, the row
constructor) live in :mod:`tasks.intake._fast`; the model keeps its constraints for rows built elsewhere.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from itertools import repeat
from typing import Any

from payops.tasks.rows.payout_row import PayoutRow, RowIssue
from payops.tasks.runtime.plurals import noun_for

from ._fast import GHANA_MSISDN, PLAIN_AMOUNT, construct_rows, joined_lines, lines_match, plain_texts
from .amounts import CellError, parse_amount
from .cells import shorten
from .columns import ColumnMap
from .models import REFERENCE_PATTERN
from .options import IntakeOptions
from .phones import normalise_msisdn
from .raw import RawSheet

NOTE_MAX = 50
NAME_MAX = 100
_REFERENCE = re.compile(REFERENCE_PATTERN)
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
_ACCOUNT = re.compile(r"^[A-Za-z0-9]{4,34}$")
_CARD = re.compile(r"^[A-Za-z0-9_-]{4,64}$")
_SCIENTIFIC = re.compile(r"^[+-]?\d+(?:[.,]\d+)?[eE][+-]?\d+$")
_PROVIDER_KEY = re.compile(r"[\s_\-]+")
_FLOAT_HINT = (
    " (the cell holds a binary fraction Excel displays rounded: round it in the sheet, e.g. =ROUND(…, 2), "
    "or type the value)"
)

DESTINATION_TYPES: dict[str, str] = {
    "msisdn": "msisdn",
    "phone": "msisdn",
    "mobile": "msisdn",
    "mobile money": "msisdn",
    "momo": "msisdn",
    "account": "account",
    "bank": "account",
    "bank account": "account",
    "card": "card",
}
"""Accepted destination type cells (case-insensitive) and what they mean."""


@dataclass
class Validated:
    rows: list[PayoutRow]
    errors: list[RowIssue]
    warnings: list[RowIssue]
    references: list[str | None] | None = None
    """Per data row, its reference as written when valid (None: blank or refused); set when the repeats were
    left to the caller (``validate_sheet(repeats=False)``: a sheet read in chunks)."""


def _too_long(text: str, limit: int) -> CellError:
    return CellError(f"the cell has {len(text)} characters; at most {limit} are allowed")


def _within(limit: int, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, refusing first any cell longer than ``limit`` (the sheet-wide cell size limit)."""

    def check(text: str) -> Any:
        if len(text) > limit:
            raise _too_long(text, limit)
        return parse(text)

    return check


def _blank_to_none(texts: list[str]) -> list[str | None]:
    return [t or None for t in texts] if "" in texts else texts  # type: ignore[return-value]


_ZERO_CENTS = Decimal("0.00")


def parse_each(texts: list[Any], parse: Callable[[Any], Any]) -> tuple[dict[Any, Any], dict[Any, CellError]]:
    """Parse each distinct value once: ``({value: result, or None for errors}, {bad value: error})``."""
    results: dict[Any, Any] = {}
    bad: dict[Any, CellError] = {}
    for text in set(texts):
        try:
            results[text] = parse(text)
        except CellError as exc:
            bad[text] = exc
            results[text] = None
    return results, bad


def parse_distinct(texts: list[Any], parse: Callable[[Any], Any]) -> tuple[list[Any], dict[Any, CellError]]:
    """Like :func:`parse_each`, with the results in the order of ``texts`` (``texts`` itself, not a copy,
    when every value parsed to itself: do not mutate the result)."""
    results, bad = parse_each(texts, parse)
    if len(results) == 1:
        return [*results.values()] * len(texts), bad
    if not bad and all(r == t for t, r in results.items()):  # every value already in its final form
        return texts, bad
    return list(map(results.__getitem__, texts)), bad


def _check_currency(options: IntakeOptions, default: str | None) -> Callable[[str], str | None]:
    """A currency cell's check; a blank cell takes ``default`` (the sheet's currency) when there is one."""

    def check(text: str) -> str | None:
        if not text:
            if default:
                return default
            raise CellError("the currency is required")
        code = text.upper()
        if not _CURRENCY.match(code):
            raise CellError(
                f"{shorten(text)!r} is not a currency code; write a three-letter code such as GHS"
            )
        if options.known_currencies and code not in options.known_currencies:
            raise CellError(
                f"currency {code} is not supported; use {', '.join(sorted(options.known_currencies))}"
            )
        return code

    return check


def _check_provider(options: IntakeOptions) -> Callable[[str], str]:
    known = options.known_providers

    def check(text: str) -> str:
        key = _PROVIDER_KEY.sub("", text.lower())
        if key in known:
            return key
        if not text:
            raise CellError("the provider is required")
        raise CellError(f"unknown provider {shorten(text)!r}; use one of {', '.join(sorted(known))}")

    return check


def _check_type(text: str) -> str | None:
    if not text:
        return None
    kind = DESTINATION_TYPES.get(_SPACES.sub(" ", text.lower().replace("_", " ")))
    if kind is None:
        raise CellError(f"unknown destination type {shorten(text)!r}; use msisdn, account or card")
    return kind


def _check_account(text: str) -> str:
    if _SCIENTIFIC.match(text):
        raise CellError(
            f"Excel turned the account number into scientific notation ({text}); format the column as Text "
            "and type the numbers again"
        )
    value = text.replace(" ", "").replace("-", "")
    if not _ACCOUNT.match(value):
        raise CellError(f"{shorten(text)!r} is not an account number (4 to 34 letters or digits)")
    return value


def _check_card(text: str) -> str:
    if not _CARD.match(text):
        raise CellError(f"{shorten(text)!r} is not a card reference (4 to 64 letters, digits, _ or -)")
    return text


def _check_reference(text: str) -> str | None:
    if not text:
        return None
    if not _REFERENCE.match(text):
        raise CellError(
            "the reference must be 1 to 64 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return text


def _free_text(what: str, limit: int, collapse: bool) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        if not text:
            return None
        if _CONTROL.search(text):
            raise CellError(f"the {what} contains control characters (line breaks, tabs); remove them")
        value = _SPACES.sub(" ", text) if collapse else text
        if len(value) > limit:
            raise CellError(f"the {what} has {len(value)} characters; at most {limit} are allowed")
        return value

    return check


def rows_list(rows: list[int]) -> str:
    """Row numbers as a message shows them, named: ``row 4``, ``rows 3, 4``; the first ten, then how many
    more."""
    shown = ", ".join(str(r) for r in rows[:10])
    return f"{noun_for(len(rows), 'row')} {shown}" + (f" and {len(rows) - 10} more" if len(rows) > 10 else "")


def repeated_reference(text: str, others: str) -> str:
    """The error on each row of a group sharing a reference (ignoring case)."""
    return f"the reference {text!r} is also used on {others}; references must be unique"


def repeated_payee(_text: str, others: str) -> str:
    """The warning on each valid row of a group with the same destination and amount."""
    return f"same destination and amount as {others}; is this payee paid twice?"


def _groups(keys: list[Hashable], positions: list[int]) -> list[list[int]]:
    """Positions sharing a key, for keys seen more than once (keys[i] belongs to positions[i])."""
    if len(set(keys)) == len(keys):
        return []
    counts = Counter(keys)
    repeated = {k for k, c in counts.items() if c > 1}
    if not repeated:
        return []
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for key, p in zip(keys, positions, strict=True):
        if key in repeated:
            groups[key].append(p)
    return list(groups.values())


def _flag_repeats(
    groups: list[list[int]],
    numbers: list[int],
    column: int,
    data: list[list[str]],
    message: Callable[[str, str], str],
    into: list[tuple[int, int, str, str]],
) -> None:
    """One entry per row of each group of repeats: ``message(cell text, the group's other rows)``."""
    for group in groups:
        rows = [numbers[p] for p in group]
        for p in group:
            others = rows_list([r for r in rows if r != numbers[p]])
            into.append((p, column, data[column][p], message(data[column][p], others)))


Issue = tuple[int, int, str, str]
"""(position, column index, cell text, message)."""


class _SheetCheck:
    """The checks of one sheet, a method per column; problems collect in ``issues`` and ``notes``."""

    def __init__(self, raw: RawSheet, cmap: ColumnMap, options: IntakeOptions) -> None:
        self.raw, self.cmap, self.options = raw, cmap, options
        self.data, self.numbers = raw.data, raw.row_numbers
        self.n = len(raw.row_numbers)
        self.limit = options.max_cell_chars
        self.bounded = partial(_within, self.limit)
        self.issues: list[Issue] = []
        self.notes: list[Issue] = []  # warnings, same shape

    def column(self, name: str) -> tuple[int | None, list[str]]:
        """The column's index (None when the sheet lacks it) and its texts (blank when it does)."""
        index = self.cmap.fields.get(name)
        return (None, [""] * self.n) if index is None else (index, self.data[index])

    def joined(self, index: int | None, texts: list[str]) -> str | None:
        """The column's texts joined by line breaks, as the reader left them (or joined now)."""
        raw = self.raw
        return raw.joined[index] if index is not None and raw.joined is not None else joined_lines(texts)

    def refuse(self, column: int | None, bad: dict[Any, CellError], texts: list[Any]) -> None:
        """Record errors for every position whose value is in ``bad`` (column index ``column``)."""
        if column is None or not bad:
            return
        for p, text in enumerate(texts):
            if text in bad:
                self.issues.append((p, column, self.data[column][p], str(bad[text])))

    def extra_cells(self) -> None:
        """Cells of the extra columns longer than the sheet-wide limit."""
        data, limit = self.data, self.limit
        for c in self.cmap.extras:
            if max(map(len, data[c]), default=0) > limit:
                long_cells = [(p, t) for p, t in enumerate(data[c]) if len(t) > limit]
                self.issues.extend((p, c, t, str(_too_long(t, limit))) for p, t in long_cells)

    def currencies(self) -> list[str | None]:
        i_cur, cur_texts = self.column("currency")
        sheet_currency = self.cmap.currency
        if i_cur is None and sheet_currency:
            return [sheet_currency] * self.n
        check = self.bounded(_check_currency(self.options, sheet_currency))
        currencies, bad = parse_distinct(cur_texts, check)
        self.refuse(i_cur, bad, cur_texts)
        return currencies

    def amounts(self, currencies: list[str | None]) -> list[Decimal | None]:
        i_amt, amt_texts = self.column("amount")
        data, bounded = self.data, self.bounded
        amount_results: dict[str, Any] = {}
        bad: dict[Any, CellError] = {}
        # plain amounts: no marks, no errors unless zero
        if lines_match(self.joined(i_amt, amt_texts), PLAIN_AMOUNT):
            decimals = list(map(Decimal, amt_texts))
            if not min(decimals):
                amount_results, bad = parse_each(amt_texts, bounded(parse_amount))
        else:
            amount_results, bad = parse_each(amt_texts, bounded(parse_amount))
        if bad:
            numeric = self.raw.numeric.get(i_amt, set())  # type: ignore[arg-type]
            for p, text in enumerate(amt_texts):
                if text in bad:
                    message = str(bad[text])
                    if p in numeric and "more than 2 decimals" in message:
                        message += _FLOAT_HINT
                    self.issues.append((p, i_amt, data[i_amt][p], message))  # type: ignore[index]
        if amount_results:
            amount_values = {t: (r[0] if r is not None else None) for t, r in amount_results.items()}
            amounts: list[Decimal | None] = list(map(amount_values.__getitem__, amt_texts))
        else:
            amounts = list(
                map(Decimal.__add__, decimals, repeat(_ZERO_CENTS))
            )  # exact: 2 decimals, as quantize
        marks = {t: r[1] for t, r in amount_results.items() if r is not None and r[1] is not None}
        if marks:
            for p, text in enumerate(amt_texts):
                mark, currency = marks.get(text), currencies[p]
                if mark is not None and currency is not None and mark != currency:
                    message = f"the amount is written in {mark} but the currency is {currency}"
                    self.issues.append((p, i_amt, data[i_amt][p], message))  # type: ignore[index]
                    amounts[p] = None
        return amounts

    def providers(self) -> list[str | None]:
        i_prov, prov_texts = self.column("provider")
        providers, bad = parse_distinct(prov_texts, self.bounded(_check_provider(self.options)))
        self.refuse(i_prov, bad, prov_texts)
        return providers

    def destination_types(self, providers: list[str | None]) -> list[str | None]:
        """The destination type of each row: as written (and matching the provider) or the provider's."""
        kinds_by_provider = self.options.provider_destination_types
        i_type, type_texts = self.column("destination_type")
        given_types, bad = parse_distinct(type_texts, self.bounded(_check_type))
        self.refuse(i_type, bad, type_texts)

        def resolve_kind(pair: tuple[str | None, str | None]) -> str | None:
            given, provider = pair
            expected = kinds_by_provider.get(provider) if provider else None
            if given is None:
                return expected or "msisdn"
            if expected is not None and given != expected:
                raise CellError(f"provider {provider} pays to {expected}, not {given}")
            return given

        if i_type is None:
            kinds, _ = parse_distinct(providers, lambda provider: resolve_kind((None, provider)))
            return kinds
        type_pairs = list(zip(given_types, providers, strict=True))
        kinds, bad_kinds = parse_distinct(type_pairs, resolve_kind)
        self.refuse(i_type, bad_kinds, type_pairs)  # type: ignore[arg-type]
        if bad:  # a refused type cell: no destination check against a guessed type
            for p, text in enumerate(type_texts):
                if text in bad:
                    kinds[p] = None
        return kinds

    def destinations(self, kinds: list[str | None]) -> list[str | None]:
        i_dest, dest_texts = self.column("destination")
        limit, cc = self.limit, self.options.default_country_code
        parsers: dict[str, Callable[[str], str]] = {
            "msisdn": lambda t: normalise_msisdn(t, cc),
            "account": _check_account,
            "card": _check_card,
        }

        def parse_destination(pair: tuple[str | None, str]) -> str | None:
            kind, text = pair
            if len(text) > limit:
                raise _too_long(text, limit)
            if kind is None:
                return None  # the type is refused; nothing to check the destination against
            if not text:
                raise CellError("the destination is required")
            return parsers[kind](text)

        dest_joined = (
            self.joined(i_dest, dest_texts) if cc == "233" and kinds.count("msisdn") == self.n else None
        )
        if lines_match(dest_joined, GHANA_MSISDN):
            return ("\n" + dest_joined).replace("\n0", "\n233")[1:].split("\n")  # type: ignore[operator]
        pairs = list(zip(kinds, dest_texts, strict=True))
        destinations, bad = parse_distinct(pairs, parse_destination)
        self.refuse(i_dest, bad, pairs)  # type: ignore[arg-type]
        return destinations

    def references(self, repeats: bool = True) -> list[str | None]:
        """References as written (None when blank); then every row sharing one (ignoring case) is refused
        (unless not ``repeats``: the caller compares them over the whole sheet)."""
        i_ref, ref_texts = self.column("reference")
        ref_joined = self.joined(i_ref, ref_texts) if i_ref is not None else None
        if i_ref is None:
            return [None] * self.n
        if lines_match(ref_joined, REFERENCE_PATTERN[1:-1] + "|"):
            references = _blank_to_none(ref_texts)
        else:
            references, bad = parse_distinct(ref_texts, self.bounded(_check_reference))
            self.refuse(i_ref, bad, ref_texts)
        if not repeats:
            return references
        if references is ref_texts and ref_joined is not None:  # every row has a valid (ASCII) reference
            with_ref: list[int] | range = range(self.n)
            folded = ref_joined.casefold().split("\n")
        else:
            with_ref = [p for p, r in enumerate(references) if r is not None]
            folded = list(map(str.casefold, [references[p] for p in with_ref]))  # type: ignore[arg-type]
        _flag_repeats(
            _groups(folded, with_ref),  # type: ignore[arg-type]
            self.numbers,
            i_ref,
            self.data,
            repeated_reference,
            self.issues,
        )
        return references

    def free_text(self, name: str, what: str, most: int, collapse: bool) -> list[str | None]:
        """A free-text column (payee name, note): printable, at most ``most`` characters."""
        index, texts = self.column(name)
        if index is None:
            return [None] * self.n
        if plain_texts(texts, min(most, self.limit), self.joined(index, texts)):
            return _blank_to_none(texts)
        values, bad = parse_distinct(texts, self.bounded(_free_text(what, most, collapse=collapse)))
        self.refuse(index, bad, texts)
        return values

    def repeated_payees(
        self,
        good: list[int] | range,
        kinds: list[str | None],
        destinations: list[str | None],
        amounts: list[Any],
    ) -> None:
        """Warn on the same destination and amount on several valid rows."""
        good_destinations = [destinations[p] for p in good] if isinstance(good, list) else destinations
        if len(set(good_destinations)) < len(
            good_destinations
        ):  # only a repeated destination repeats a payee
            keys = [(kinds[p], destinations[p], amounts[p]) for p in good]
            _flag_repeats(
                _groups(keys, good),  # type: ignore[arg-type]
                self.numbers,
                self.cmap.fields.get("destination"),  # type: ignore[arg-type]
                self.data,
                repeated_payee,
                self.notes,
            )

    def numeric_accounts(self, kinds: list[str | None], invalid: set[int]) -> None:
        """Warn on account numbers the workbook stored as numbers (leading zeros lost)."""
        i_dest = self.cmap.fields.get("destination")
        for p in sorted(self.raw.numeric.get(i_dest, ())):  # type: ignore[arg-type]
            if kinds[p] == "account" and p not in invalid:
                self.notes.append(
                    (
                        p,
                        i_dest,  # type: ignore[arg-type]
                        self.data[i_dest][p],  # type: ignore[index]
                        "the account number is stored as a number in Excel, which drops leading zeros; "
                        "check it (format the column as Text)",
                    )
                )

    def extras(self) -> list[dict[str, str]]:
        """Each row's extra columns, header → text."""
        extra_headers = [self.raw.columns[i] for i in self.cmap.extras]
        extra_columns = [self.data[i] for i in self.cmap.extras]
        if not extra_headers:
            return [{} for _ in range(self.n)]
        if len(extra_headers) == 1:  # the common case; a dict display is twice as fast as dict(zip(...))
            header = extra_headers[0]
            return [{header: text} for text in extra_columns[0]]
        return list(map(dict, map(partial(zip, extra_headers), zip(*extra_columns, strict=True))))


def validate_sheet(
    raw: RawSheet, cmap: ColumnMap, options: IntakeOptions, *, repeats: bool = True
) -> Validated:
    """Check every data row; return valid rows (sheet order), errors and warnings (sorted by row, column).

    Every cell is checked against ``options.max_cell_chars``: the field checks refuse a longer cell before
    anything else (their fast paths accept only texts far shorter), and the extra columns are measured here.
    Not ``repeats``: repeated references and payees are left to the caller, which reads a sheet in chunks
    and compares them over all of it (`tasks.intake.streaming`); ``references`` then lists each row's.
    """
    check = _SheetCheck(raw, cmap, options)
    check.extra_cells()
    currencies = check.currencies()
    amounts = check.amounts(currencies)
    providers = check.providers()
    kinds = check.destination_types(providers)
    destinations = check.destinations(kinds)
    references = check.references(repeats)
    names = check.free_text("payee_name", "payee name", NAME_MAX, collapse=True)
    notes = check.free_text("note", "note", NOTE_MAX, collapse=False)

    invalid = {issue[0] for issue in check.issues}
    good = [p for p in range(check.n) if p not in invalid] if invalid else range(check.n)
    if repeats:
        check.repeated_payees(good, kinds, destinations, amounts)
    check.numeric_accounts(kinds, invalid)

    fields = [raw.row_numbers, references, amounts, currencies, providers, kinds, destinations, names, notes]
    fields.append(check.extras())
    if invalid:
        fields = [[col[p] for p in good] for col in fields]  # type: ignore[index]
    return Validated(
        rows=construct_rows(fields),
        errors=_issues(check.issues, raw.row_numbers, raw.columns),
        warnings=_issues(check.notes, raw.row_numbers, raw.columns),
        references=None if repeats else references,
    )


def _issues(found: list[tuple[int, int, str, str]], numbers: list[int], columns: list[str]) -> list[RowIssue]:
    """RowIssues sorted by row, then column order."""
    return [RowIssue(numbers[p], columns[c], shorten(text), message) for p, c, text, message in sorted(found)]
