"""Turning a sheet file's bytes into its cells as text: the parsing that runs in the parser child.

Imported by ``tasks.intake.parser_child`` in a fresh interpreter for every sheet, so it imports nothing heavy
(no pydantic, pandas or openpyxl): calamine, the csv module and the intake's cell rules.

xlsx cells are read with python-calamine, the engine behind ``pandas.read_excel(engine="calamine")``, but
through its own API: ``pd.read_excel(dtype=str)`` already turns ``1e20`` into ``"100000000000000000000"`` and
dates into ``"2024-01-05 00:00:00"``, losing whether a cell was a number, a date or text; the typed values let
``cells.cell_text`` recover what the operator meant (integer floats → digits, numbers over 15 digits →
scientific text that is refused, dates → ISO text refused as amounts) and skip building a DataFrame.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat

from python_calamine import CalamineError, CalamineWorkbook, SheetTypeEnum, SheetVisibleEnum

from .cells import STRIP_CHARS, cell_text, clean_text, float_text
from .errors import IntakeError
from .raw import RawSheet, joined_lines

PREFERRED_SHEET = "payouts"


@dataclass(frozen=True)
class ParseLimits:
    """The limits the parser itself enforces (from :class:`IntakeOptions`)."""

    max_rows: int
    max_columns: int


class SheetRefusal(IntakeError):
    """An xlsx refused while parsing; ``sheet`` is the chosen sheet when there was one (the reader checks
    that sheet's formulas first, so a file saved without formula values gets that message)."""

    def __init__(self, message: str, sheet: str | None) -> None:
        super().__init__(message)
        self.sheet = sheet


def column_letter(index: int) -> str:
    """0 → ``A``, 27 → ``AB``."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _choose_sheet(book: CalamineWorkbook) -> str:
    sheets = [m for m in book.sheets_metadata if m.typ == SheetTypeEnum.WorkSheet]
    for meta in sheets:
        if meta.name.strip().casefold() == PREFERRED_SHEET:
            if meta.visible != SheetVisibleEnum.Visible:
                raise IntakeError(
                    f"the sheet {meta.name!r} is hidden; unhide it (or rename it) so it is clear what is paid"
                )
            return meta.name
    for meta in sheets:
        if meta.visible == SheetVisibleEnum.Visible:
            return meta.name
    raise IntakeError("the workbook has no visible worksheet")


def _blank(value: object) -> bool:
    if type(value) is str:
        return not clean_text(value)  # type: ignore[arg-type]
    return value is None or value == ""


_ZERO_WIDTH = "\u200b\u2060\ufeff"
"""The characters of ``cells.STRIP_CHARS`` that ``str.strip()`` (all Unicode whitespace) leaves."""


_ASCII_SPACES = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"
"""The ASCII whitespace characters (``str.isspace``) besides space and line break."""


def _ascii_edges_to_trim(joined: str) -> bool:
    """Whether some cell of an ASCII column joined by line breaks (none inside a cell) starts or ends with
    whitespace. Substring searches, most of them for characters absent from the text (memchr speed), cost
    a fraction of stripping every cell."""
    return (
        joined[:1] == " "
        or joined[-1:] == " "
        or "\n " in joined
        or " \n" in joined
        or any(c in joined for c in _ASCII_SPACES)
    )


def _float_texts(values: Sequence[float]) -> tuple[list[str], str]:
    """:func:`cells.float_text` of a column of floats all below 1e15, and the texts joined by line breaks,
    in a few whole-column string passes: ``repr`` is the shortest round-trip text, and an integer-valued
    float's ``.0`` is cut where it ends a cell."""
    joined = "\n" + "\n".join(map(repr, values)) + "\n"
    if "\n-0.0\n" in joined:  # float_text shows negative zero as 0
        texts = [float_text(v) for v in values]
        return texts, "\n".join(texts)
    joined = joined.replace(".0\n", "\n")[1:-1]
    return joined.split("\n"), joined


def _column_texts(values: Sequence[object]) -> tuple[list[str], list[int], str | None]:
    """Texts of one column, the positions of numeric (float) cells, and the texts joined by line breaks
    (None when a text holds one), which validation's whole-column checks reuse."""
    try:  # fast path, all in C: text cells only (csv, most columns); a non-text cell raises TypeError
        joined = "\n".join(values)  # type: ignore[arg-type]
    except TypeError:
        pass  # a number, date or empty cell: per-type conversion below
    else:
        if joined.count("\n") == len(values) - 1 and joined.isascii() and not _ascii_edges_to_trim(joined):
            return list(values), [], joined  # type: ignore[arg-type]
        # str.strip() without an argument trims all Unicode whitespace, faster than with STRIP_CHARS;
        # the zero-width characters it leaves can only be there when the joined column is not ASCII.
        texts = list(map(str.strip, values))  # type: ignore[arg-type]
        joined = "\n".join(texts)
        if not joined.isascii() and any(z in joined for z in _ZERO_WIDTH):
            texts = list(map(str.strip, texts, repeat(STRIP_CHARS, len(texts))))
            joined = "\n".join(texts)
        return texts, [], joined if joined.count("\n") == len(texts) - 1 else None
    kinds = set(map(type, values))
    if kinds == {float} and max(map(abs, values)) < 1e15:  # type: ignore[arg-type]
        texts, joined = _float_texts(values)  # type: ignore[arg-type]
        return texts, list(range(len(values))), joined
    texts = [v.strip(STRIP_CHARS) if type(v) is str else cell_text(v) for v in values]  # type: ignore[attr-defined]
    numeric = [p for p, v in enumerate(values) if type(v) is float] if float in kinds else []
    return texts, numeric, joined_lines(texts)


def _columns(rows: list[list[object]], min_width: int) -> list[Sequence[object]]:
    """The rows' cells column by column, at least ``min_width`` columns (short rows padded with "")."""
    lengths = set(map(len, rows))
    width = max(lengths | {min_width})
    if not rows:
        return [() for _ in range(width)]
    if lengths == {width}:
        flat = list(chain.from_iterable(rows))  # row-major, then strided slices: twice as fast as zip(*rows)
        return [flat[c::width] for c in range(width)]
    return list(zip(*(list(r) + [""] * (width - len(r)) for r in rows), strict=True))


def _blank_positions(data: list[list[str]]) -> set[int]:
    """Positions blank in every column (blank rows); a column without blanks ends the search early."""
    blank: set[int] | None = None
    for col in data:
        if "" not in col:
            return set()  # a column without blanks: no blank row
        here = {p for p, t in enumerate(col) if not t}
        blank = here if blank is None else blank & here
        if not blank:
            return set()
    return blank or set()


def _raw_from_rows(
    rows: list[list[object]],
    row_numbers: list[int],
    sheet: str | None,
    options: ParseLimits,
) -> RawSheet:
    """Header = first non-blank row; data = the following non-blank rows, every cell as text.

    A column with data but no header is kept as an extra column named ``column X``.
    """
    start = next((i for i, cells in enumerate(rows) if not all(_blank(v) for v in cells)), None)
    where = f" {sheet!r}" if sheet else ""
    if start is None:
        raise IntakeError(f"the sheet{where} is empty: no header row")
    header = [cell_text(v) for v in rows[start]]
    body = rows[start + 1 :]
    by_column = _columns(body, len(header))
    width = len(by_column)
    indexes = [c for c in range(width) if c < len(header) and header[c]]
    headed = set(indexes)
    for c in range(width):
        if c not in headed and any(not _blank(v) for v in by_column[c]):
            indexes.append(c)
    indexes.sort()
    columns = [header[c] if c < len(header) and header[c] else f"column {column_letter(c)}" for c in indexes]
    if len(columns) > options.max_columns:
        raise IntakeError(f"the sheet has {len(columns)} columns (limit {options.max_columns})")
    data: list[list[str]] = []
    joined: list[str | None] = []
    numeric: dict[int, list[int]] = {}
    for k, c in enumerate(indexes):
        texts, floats, lines = _column_texts(by_column[c])
        data.append(texts)
        joined.append(lines)
        if floats:
            numeric[k] = floats
    numbers = row_numbers[start + 1 :]
    blank_rows = _blank_positions(data)
    if blank_rows:
        keep = [p for p in range(len(numbers)) if p not in blank_rows]
        data = [[col[p] for p in keep] for col in data]
        new_position = {old: new for new, old in enumerate(keep)}
        numeric = {k: [new_position[p] for p in ps if p in new_position] for k, ps in numeric.items()}
        numbers = [numbers[p] for p in keep]
        joined = list(map(joined_lines, data))
    if not numbers:
        raise IntakeError(f"the sheet{where} has a header but no data rows")
    if len(numbers) > options.max_rows:
        raise IntakeError(
            f"the sheet has {len(numbers):,} data rows (limit {options.max_rows:,}); split it into several "
            "files"
        )
    return RawSheet(
        sheet=sheet,
        columns=columns,
        data=data,
        row_numbers=numbers,
        numeric={k: set(ps) for k, ps in numeric.items()},
        header_row=row_numbers[start],
        joined=joined,
        sheet_columns=indexes,
    )


def parse_xlsx(data: bytes, limits: ParseLimits) -> RawSheet:
    """The chosen sheet's cells as text (calamine); IntakeError names the sheet when one was chosen."""
    name = None
    try:
        book = CalamineWorkbook.from_filelike(io.BytesIO(data))
        name = _choose_sheet(book)
        sheet = book.get_sheet_by_name(name)
        merged = sheet.merged_cell_ranges or []
        rows = sheet.to_python(skip_empty_area=False)
        raw = _raw_from_rows(rows, list(range(1, len(rows) + 1)), name, limits)
    except CalamineError as exc:
        raise SheetRefusal(f"the xlsx cannot be read: {exc}", name) from exc
    except IntakeError as exc:
        raise SheetRefusal(str(exc), name) from exc
    header_row = raw.header_row - 1
    for (r1, c1), (r2, c2) in merged:
        if r1 <= header_row <= r2:
            raise SheetRefusal(
                f"the header row (row {header_row + 1}) has merged cells "
                f"({column_letter(c1)}{r1 + 1}:{column_letter(c2)}{r2 + 1}); unmerge them so every column "
                "has its own header",
                name,
            )
    return raw


def _sniff_delimiter(text: str) -> str:
    """``;`` or ``,`` (or tab): whichever occurs most in the first non-blank line outside quotes."""
    for line in io.StringIO(text):
        if line.strip():
            unquoted = "".join(part for k, part in enumerate(line.split('"')) if k % 2 == 0)
            counts = {d: unquoted.count(d) for d in (",", ";", "\t")}
            best = max(counts, key=lambda d: counts[d])
            return best if counts[best] else ","
    return ","


def not_utf8(byte: int) -> IntakeError:
    """The refusal of a csv whose ``byte`` (counted after a BOM) is the first that is not UTF-8."""
    return IntakeError(f"the csv is not UTF-8 (byte {byte}); save it as 'CSV UTF-8 (comma delimited)'")


def parse_csv(data: bytes, options: ParseLimits) -> RawSheet:
    """The csv's cells as text (UTF-8, delimiter sniffed); IntakeError for an unreadable file."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IntakeError("the csv is UTF-16; save it as 'CSV UTF-8'")
    if data.startswith(b"PK\x03\x04"):
        raise IntakeError(
            "the file is named .csv but is an Excel workbook; save it as .xlsx or as 'CSV UTF-8'"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_utf8(exc.start) from exc
    if "\x00" in text:
        raise IntakeError("the csv contains NUL bytes; it is not a text file")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_sniff_delimiter(text))
    rows: list[list[object]] = []
    numbers: list[int] = []
    line = 1
    non_blank = 0
    try:
        for record in reader:
            rows.append(record)  # type: ignore[arg-type]
            numbers.append(line)
            line = reader.line_num + 1
            if any(record):
                non_blank += 1
                if non_blank > options.max_rows + 1:
                    raise IntakeError(
                        f"the csv has more than {options.max_rows:,} data rows (limit {options.max_rows:,}); "
                        "split it"
                    )
    except csv.Error as exc:
        raise IntakeError(f"the csv cannot be read near line {line}: {exc}") from exc
    return _raw_from_rows(rows, numbers, None, options)
