"""Row validation: every field of every row checked, every problem located by row and column.

Speed: ``PayoutRow.model_validate`` per row costs ~8 µs and ``model_construct`` ~10 µs (measured), i.e. about
a second per 100k rows, a third of the read+validate budget, spent on checks done here anyway. So the sheet is
checked column by column: each distinct cell text is parsed once (providers, currencies, types and often
amounts repeat) with compiled regexes, and valid rows are built by :func:`construct_rows`, which does what
``model_construct`` does without its per-field loop. The model keeps its constraints for rows built elsewhere;
tests/tasks/intake pins that constructed rows equal ``PayoutRow.model_validate`` of the same data.
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

from pydantic import BaseModel

from .amounts import CellError, parse_amount
from .cells import shorten
from .columns import ColumnMap
from .models import REFERENCE_PATTERN, PayoutRow, RowIssue
from .options import IntakeOptions
from .phones import normalise_msisdn
from .raw import RawSheet, joined_lines

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


_FIELDS_SET = frozenset(PayoutRow.model_fields)
_new_row = PayoutRow.__new__
# BaseModel keeps its state in four slots; their descriptors' setters are what model_construct calls, minus
# its per-field loop and attribute lookups (2.5x faster than object.__setattr__ by name, measured).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _fast_construct(
    row: int,
    reference: str | None,
    amount: Decimal,
    currency: str,
    provider: str,
    destination_type: str,
    destination: str,
    payee_name: str | None,
    note: str | None,
    extra: dict[str, str],
) -> PayoutRow:
    made = _new_row(PayoutRow)
    _set_dict(
        made,
        {
            "row": row,
            "reference": reference,
            "amount": amount,
            "currency": currency,
            "provider": provider,
            "destination_type": destination_type,
            "destination": destination,
            "payee_name": payee_name,
            "note": note,
            "extra": extra,
        },
    )
    _set_fields_set(made, _FIELDS_SET)
    _set_extra(made, None)
    _set_private(made, None)
    return made


def _model_construct(*values: Any) -> PayoutRow:
    return PayoutRow.model_construct(**dict(zip(PayoutRow.model_fields, values, strict=True)))


def _fast_construct_works() -> bool:
    sample = {
        "row": 2,
        "reference": "R1",
        "amount": Decimal("1.00"),
        "currency": "GHS",
        "provider": "mtn",
        "destination_type": "msisdn",
        "destination": "233241234567",
        "payee_name": None,
        "note": None,
        "extra": {},
    }
    try:
        fast = _fast_construct(*sample.values())
        return (
            list(PayoutRow.model_fields) == list(sample)
            and fast == PayoutRow.model_validate(sample)
            and fast.model_dump() == sample
        )
    except (AttributeError, TypeError, KeyError):  # a pydantic release changed its internals
        return False


_CONSTRUCT: Callable[..., PayoutRow] = _fast_construct if _fast_construct_works() else _model_construct


def construct_rows(columns: list[list[Any]]) -> list[PayoutRow]:
    """Build PayoutRows from already-validated columns, one list per field in ``PayoutRow.model_fields``
    order (row, reference, amount, currency, provider, destination_type, destination, payee_name, note,
    extra)."""
    return list(map(_CONSTRUCT, *columns))


def lines_match(joined: str | None, pattern: str) -> bool:
    """True when every line of ``joined`` fully matches ``pattern``: one regex pass over a whole column
    instead of one call per cell (the common, all-valid case); callers fall back to per-value parsing."""
    return joined is not None and re.fullmatch(f"(?:(?:{pattern})\n)*(?:{pattern})", joined) is not None


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


def _plain_texts(texts: list[str], limit: int, joined: str | None) -> bool:
    """True when every text is printable (no control characters, no whitespace but single spaces) and at
    most ``limit`` long: such texts need no cleaning. ``str.isprintable`` is stricter than needed (format
    characters, unassigned code points); those texts take the per-value path."""
    if not texts or max(map(len, texts)) > limit:
        return not texts
    return joined is not None and "  " not in joined and joined.replace("\n", " ").isprintable()


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


def _check_currency(options: IntakeOptions) -> Callable[[str], str | None]:
    default = options.default_currency

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


def _rows_list(rows: list[int]) -> str:
    shown = ", ".join(str(r) for r in rows[:10])
    return shown + (f" and {len(rows) - 10} more" if len(rows) > 10 else "")


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
            others = _rows_list([r for r in rows if r != numbers[p]])
            into.append((p, column, data[column][p], message(data[column][p], others)))


def validate_sheet(raw: RawSheet, cmap: ColumnMap, options: IntakeOptions) -> Validated:
    """Check every data row; return valid rows (sheet order), errors and warnings (sorted by row, column).

    Every cell is checked against ``options.max_cell_chars``: the field checks refuse a longer cell before
    anything else (their fast paths accept only texts far shorter), and the extra columns are measured here.
    """
    columns, data, numbers = raw.columns, raw.data, raw.row_numbers
    n = len(numbers)
    pos = cmap.fields
    issues: list[tuple[int, int, str, str]] = []  # (position, column index, cell text, message)
    notes: list[tuple[int, int, str, str]] = []  # warnings, same shape
    limit = options.max_cell_chars
    bounded = partial(_within, limit)

    def refuse(column: int | None, bad: dict[Any, CellError], texts: list[Any]) -> None:
        """Record errors for every position whose value is in ``bad`` (column index ``column``)."""
        if column is None or not bad:
            return
        for p, text in enumerate(texts):
            if text in bad:
                issues.append((p, column, data[column][p], str(bad[text])))

    for c in cmap.extras:
        if max(map(len, data[c]), default=0) > limit:
            long_cells = [(p, t) for p, t in enumerate(data[c]) if len(t) > limit]
            issues.extend((p, c, t, str(_too_long(t, limit))) for p, t in long_cells)

    def column(name: str) -> tuple[int | None, list[str]]:
        index = pos.get(name)
        return (None, [""] * n) if index is None else (index, data[index])

    def joined(index: int | None, texts: list[str]) -> str | None:
        """The column's texts joined by line breaks, as the reader left them (or joined now)."""
        return raw.joined[index] if index is not None and raw.joined is not None else joined_lines(texts)

    i_cur, cur_texts = column("currency")
    if i_cur is None and options.default_currency:
        currencies: list[str | None] = [options.default_currency] * n
    else:
        currencies, bad = parse_distinct(cur_texts, bounded(_check_currency(options)))
        refuse(i_cur, bad, cur_texts)

    i_amt, amt_texts = column("amount")
    amount_results: dict[str, Any] = {}
    bad = {}
    # plain amounts (ASCII digits; [0-9] is also twice as fast as \d): no marks, no errors unless zero
    if lines_match(joined(i_amt, amt_texts), r"[0-9]{1,15}(?:\.[0-9]{1,2})?"):
        decimals = list(map(Decimal, amt_texts))
        if not min(decimals):
            amount_results, bad = parse_each(amt_texts, bounded(parse_amount))
    else:
        amount_results, bad = parse_each(amt_texts, bounded(parse_amount))
    if bad:
        numeric = raw.numeric.get(i_amt, set())  # type: ignore[arg-type]
        for p, text in enumerate(amt_texts):
            if text in bad:
                message = str(bad[text])
                if p in numeric and "more than 2 decimals" in message:
                    message += _FLOAT_HINT
                issues.append((p, i_amt, data[i_amt][p], message))  # type: ignore[index]
    if amount_results:
        amount_values = {t: (r[0] if r is not None else None) for t, r in amount_results.items()}
        amounts: list[Decimal | None] = list(map(amount_values.__getitem__, amt_texts))
    else:
        amounts = list(map(Decimal.__add__, decimals, repeat(_ZERO_CENTS)))  # exact: 2 decimals, as quantize
    marks = {t: r[1] for t, r in amount_results.items() if r is not None and r[1] is not None}
    if marks:
        for p, text in enumerate(amt_texts):
            mark, currency = marks.get(text), currencies[p]
            if mark is not None and currency is not None and mark != currency:
                message = f"the amount is written in {mark} but the currency is {currency}"
                issues.append((p, i_amt, data[i_amt][p], message))  # type: ignore[index]
                amounts[p] = None

    i_prov, prov_texts = column("provider")
    providers, bad = parse_distinct(prov_texts, bounded(_check_provider(options)))
    refuse(i_prov, bad, prov_texts)

    kinds_by_provider = options.provider_destination_types
    i_type, type_texts = column("destination_type")
    given_types, bad = parse_distinct(type_texts, bounded(_check_type))
    refuse(i_type, bad, type_texts)

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
    else:
        type_pairs = list(zip(given_types, providers, strict=True))
        kinds, bad_kinds = parse_distinct(type_pairs, resolve_kind)
        refuse(i_type, bad_kinds, type_pairs)  # type: ignore[arg-type]
        if bad:  # a refused type cell: no destination check against a guessed type
            for p, text in enumerate(type_texts):
                if text in bad:
                    kinds[p] = None

    i_dest, dest_texts = column("destination")
    cc = options.default_country_code
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

    dest_joined = joined(i_dest, dest_texts) if cc == "233" and kinds.count("msisdn") == n else None
    if lines_match(dest_joined, r"0[0-9]{9}|233[0-9]{9}"):  # local (0…) or international Ghana numbers
        destinations = ("\n" + dest_joined).replace("\n0", "\n233")[1:].split("\n")  # type: ignore[operator]
    else:
        pairs = list(zip(kinds, dest_texts, strict=True))
        destinations, bad = parse_distinct(pairs, parse_destination)
        refuse(i_dest, bad, pairs)  # type: ignore[arg-type]

    i_ref, ref_texts = column("reference")
    ref_joined = joined(i_ref, ref_texts) if i_ref is not None else None
    if i_ref is None:
        references: list[str | None] = [None] * n
    elif lines_match(ref_joined, REFERENCE_PATTERN[1:-1] + "|"):
        references = _blank_to_none(ref_texts)
    else:
        references, bad = parse_distinct(ref_texts, bounded(_check_reference))
        refuse(i_ref, bad, ref_texts)

    i_name, name_texts = column("payee_name")
    if i_name is None:
        names: list[str | None] = [None] * n
    elif _plain_texts(name_texts, min(NAME_MAX, limit), joined(i_name, name_texts)):
        names = _blank_to_none(name_texts)
    else:
        names, bad = parse_distinct(name_texts, bounded(_free_text("payee name", NAME_MAX, collapse=True)))
        refuse(i_name, bad, name_texts)

    i_note, note_texts = column("note")
    if i_note is None:
        notes_col: list[str | None] = [None] * n
    elif _plain_texts(note_texts, min(NOTE_MAX, limit), joined(i_note, note_texts)):
        notes_col = _blank_to_none(note_texts)
    else:
        notes_col, bad = parse_distinct(note_texts, bounded(_free_text("note", NOTE_MAX, collapse=False)))
        refuse(i_note, bad, note_texts)

    # duplicate references (ignoring case): an error on every row sharing one
    if references is ref_texts and ref_joined is not None:  # every row has a valid (ASCII) reference
        with_ref: list[int] | range = range(n)
        folded = ref_joined.casefold().split("\n")
    else:
        with_ref = [p for p, r in enumerate(references) if r is not None]
        folded = list(map(str.casefold, [references[p] for p in with_ref]))  # type: ignore[arg-type]
    _flag_repeats(
        _groups(folded, with_ref),  # type: ignore[arg-type]
        numbers,
        i_ref,  # type: ignore[arg-type]
        data,
        lambda text, others: (
            f"the reference {text!r} is also used on row(s) {others}; references must be unique"
        ),
        issues,
    )

    invalid = {issue[0] for issue in issues}
    good = [p for p in range(n) if p not in invalid] if invalid else range(n)

    # warnings: the same destination and amount on several valid rows; numeric account numbers
    good_destinations = [destinations[p] for p in good] if invalid else destinations
    if len(set(good_destinations)) < len(good_destinations):  # only a repeated destination can repeat a payee
        keys = [(kinds[p], destinations[p], amounts[p]) for p in good]
        _flag_repeats(
            _groups(keys, good),  # type: ignore[arg-type]
            numbers,
            i_dest,  # type: ignore[arg-type]
            data,
            lambda _text, others: (
                f"same destination and amount as row(s) {others}; is this payee paid twice?"
            ),
            notes,
        )
    for p in sorted(raw.numeric.get(i_dest, ())):  # type: ignore[arg-type]
        if kinds[p] == "account" and p not in invalid:
            notes.append(
                (
                    p,
                    i_dest,  # type: ignore[arg-type]
                    data[i_dest][p],  # type: ignore[index]
                    "the account number is stored as a number in Excel, which drops leading zeros; check it "
                    "(format the column as Text)",
                )
            )

    extra_headers = [columns[i] for i in cmap.extras]
    extra_columns = [data[i] for i in cmap.extras]
    if not extra_headers:
        extras = [{} for _ in range(n)]
    elif len(extra_headers) == 1:  # the common case; a dict display is twice as fast as dict(zip(...))
        header = extra_headers[0]
        extras = [{header: text} for text in extra_columns[0]]
    else:
        extras = list(map(dict, map(partial(zip, extra_headers), zip(*extra_columns, strict=True))))
    fields = [numbers, references, amounts, currencies, providers, kinds, destinations, names, notes_col]
    fields.append(extras)
    if invalid:
        fields = [[col[p] for p in good] for col in fields]  # type: ignore[index]
    return Validated(
        rows=construct_rows(fields),
        errors=_issues(issues, numbers, columns),
        warnings=_issues(notes, numbers, columns),
    )


def _issues(found: list[tuple[int, int, str, str]], numbers: list[int], columns: list[str]) -> list[RowIssue]:
    """RowIssues sorted by row, then column order."""
    return [RowIssue(numbers[p], columns[c], shorten(text), message) for p, c, text, message in sorted(found)]
