"""A csv payroll of any length, read and validated in chunks into a spill file: memory bounded by the chunk,
not the sheet.

`read_payout_sheet` holds the whole sheet (its bytes, every cell, every validated row: about 1.4 KB a row,
and a 50 MB, 200,000-row limit). Here the csv is decoded and parsed a chunk of lines at a time, each chunk
validated by the same checks (`validate_sheet`, column by column, with the header of the sheet), and the
valid rows, errors and warnings go to a `RowSink`. The checks that compare rows (a reference used twice,
the same payee and amount twice) run once every chunk is in, as groupings over the spill, with the same
messages: a sheet read in chunks gets exactly the findings it gets read whole (the tests compare them).

The csv module parses in this process, a line at a time: unlike an xlsx (a zip of XML, parsed in a child
with memory and CPU limits), a csv line costs what it holds, and the reader bounds a field's length
(`csv.field_size_limit`) and the rows it reads. The file is hashed as it is read (the run label's content
hash).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

import fsspec
from payops.tasks.rows.payout_row import RowIssue
from payops.tasks.rows.sink import RowSink

from .cells import shorten
from .columns import ColumnMap, sheet_columns
from .errors import IntakeError
from .options import IntakeOptions
from .parsing import ParseLimits, _blank, _raw_from_rows, _sniff_delimiter, not_utf8
from .sources import extension, source_size
from .validation import repeated_payee, repeated_reference, rows_list, validate_sheet

CHUNK_ROWS = 20_000
"""Lines validated at once: large enough for the column-wise checks' speed, small against the sheet."""
MAX_ROWS = 10_000_000
"""The most data rows a streamed csv may hold."""
MAX_BYTES = 2 * 1024 * 1024 * 1024
"""The largest csv streamed (a million realistic rows take about 100 MB)."""
FIELD_LIMIT = 64 * 1024
"""The longest csv field read (the cell limit is checked after; a field this long is refused outright)."""


@dataclass
class StreamedSheet:
    """What streaming a csv yielded; its rows, errors and warnings are in ``spill``."""

    source: str
    content_sha256: str
    rows_total: int
    columns: list[str]
    mapped: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    currency: str | None = None
    currency_header: str | None = None

    def summary(self, spill: RowSink) -> dict[str, int]:
        """Counts a run summary shows (valid rows, rows with errors, warnings) from the spill."""
        return {
            "rows_total": self.rows_total,
            "rows_valid": len(spill),
            "rows_invalid": spill.rows_with_errors(),
            "warnings": spill.issue_count("warning"),
        }


class _Hashing(io.RawIOBase):
    """A binary stream that hashes what is read through it."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)


class _NotUtf8(Exception):  # noqa: N818 - raised by the line reader, turned into an IntakeError here
    pass


def _lines(text: IO[str]) -> Iterator[str]:
    """The csv's lines; IntakeError for a NUL byte, _NotUtf8 for bytes that are not UTF-8."""
    try:
        for line in text:
            if "\x00" in line:
                raise IntakeError("the csv contains NUL bytes; it is not a text file")
            yield line
    except UnicodeDecodeError as exc:
        raise _NotUtf8 from exc


def _first_bad_byte(handle: IO[bytes]) -> int:
    """Where the first byte that is not UTF-8 is (counted after a BOM, as `parse_csv` counts it), read again
    a block at a time: the line reader's decoder only knows its own block."""
    handle.seek(0)
    if handle.read(3) != codecs.BOM_UTF8:
        handle.seek(0)
    offset, pending = 0, b""
    while True:
        block = handle.read(1 << 20)
        data = pending + block
        try:
            _, used = codecs.utf_8_decode(data, "strict", not block)
        except UnicodeDecodeError as exc:
            return offset + exc.start
        if not block:
            return offset
        offset, pending = offset + used, data[used:]


def streams(source: str | os.PathLike[str], over_bytes: int) -> bool:
    """Whether a sheet is read in chunks into a spill file: a csv larger than ``over_bytes``
    (`store.settings.PayopsSettings.stream_csv_over_bytes`); any other sheet is read whole."""
    name = os.fspath(source)
    if extension(name) != ".csv":
        return False
    size = source_size(name)
    return size is not None and size > over_bytes


def check_csv_size(size: int | None) -> None:
    """IntakeError for a csv of ``size`` bytes larger than the streamed limit (None: not known yet)."""
    if size is not None and size > MAX_BYTES:
        mb = 1024 * 1024
        raise IntakeError(
            f"the csv is {size / mb:.0f} MB; the largest read is {MAX_BYTES / mb:.0f} MB: split it"
        )


def _open(source: str) -> IO[bytes]:
    if "://" not in source and not os.path.isfile(source):
        raise IntakeError(f"file not found: {source}")
    check_csv_size(source_size(source))
    return fsspec.open(source, "rb").open()


def stream_csv(
    source: str | os.PathLike[str],
    spill: RowSink,
    options: IntakeOptions | None = None,
    *,
    chunk_rows: int = CHUNK_ROWS,
    max_rows: int = MAX_ROWS,
) -> StreamedSheet:
    """Read and validate the csv ``source`` (local path or fsspec URL) into ``spill``; IntakeError for
    whole-file problems (as `read_payout_sheet` raises them)."""
    options = options or IntakeOptions()
    name = os.fspath(source)
    limits = ParseLimits(max_rows=chunk_rows + 1, max_columns=options.max_columns)
    with _open(name) as handle:
        head = handle.read(4)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise IntakeError("the csv is UTF-16; save it as 'CSV UTF-8'")
        if head.startswith(b"PK\x03\x04"):
            raise IntakeError(
                "the file is named .csv but is an Excel workbook; save it as .xlsx or as 'CSV UTF-8'"
            )
        handle.seek(0)
        hashing = _Hashing(handle)
        text = io.TextIOWrapper(io.BufferedReader(hashing, 1 << 20), encoding="utf-8-sig", newline="")
        try:
            reader = _csv_reader(_lines(text))
            streamed = _stream(reader, spill, options, limits, chunk_rows, max_rows, name)
        except _NotUtf8:
            raise not_utf8(_first_bad_byte(handle)) from None
        streamed.content_sha256 = hashing.digest.hexdigest()
    return streamed


def _csv_reader(lines: Iterator[str]) -> Iterator[list[str]]:
    """The csv's records, the delimiter sniffed from its first line that is not blank."""
    first = list(_until_text(lines))
    if not first:
        raise IntakeError("the file is empty")
    return csv.reader(_chain(first, lines), delimiter=_sniff_delimiter(first[-1]))


def _until_text(lines: Iterator[str]) -> Iterator[str]:
    """Lines up to and including the first that is not blank (the delimiter is sniffed from it)."""
    for line in lines:
        yield line
        if line.strip():
            return


def _chain(first: list[str], rest: Iterator[str]) -> Iterator[str]:
    yield from first
    yield from rest


@dataclass
class _Columns:
    """Where the cross-row checks find their cells, from the first chunk's columns."""

    names: list[str]
    cmap: ColumnMap
    reference: int | None
    destination: int | None


@dataclass
class _Chunks:
    """The read of one csv: the header, then chunks of lines validated into the spill."""

    spill: RowSink
    options: IntakeOptions
    limits: ParseLimits
    header: list[str] | None = None
    header_line: int = 0
    cols: _Columns | None = None
    total: int = 0

    def validate(self, chunk: list[list[str]], numbers: list[int]) -> None:
        """One chunk of lines, with the sheet's header, validated into the spill."""
        if self.header is None or all(_blank(v) for r in chunk for v in r):
            return  # blank lines only
        raw = _raw_from_rows(
            [self.header, *chunk],  # type: ignore[list-item]
            [self.header_line, *numbers],
            None,
            self.limits,
        )
        options = self.options
        cmap = sheet_columns(raw.columns, options)
        if self.cols is None:
            fields = cmap.fields
            self.cols = _Columns(raw.columns, cmap, fields.get("reference"), fields.get("destination"))
        self.spill.add_cells(zip(raw.row_numbers, zip(*raw.data, strict=True), strict=True))
        checked = validate_sheet(raw, cmap, options, repeats=False)
        position = {row: p for p, row in enumerate(raw.row_numbers)}
        dest = cmap.fields.get("destination")
        cells = [raw.data[dest][position[r.row]] if dest is not None else "" for r in checked.rows]
        self.spill.append(checked.rows, cells)
        column_at = {c: k for k, c in reversed(list(enumerate(raw.columns)))}
        self.spill.add_issues("error", [(i, column_at[i.column]) for i in checked.errors])
        self.spill.add_issues("warning", [(i, column_at[i.column]) for i in checked.warnings])
        ref = cmap.fields.get("reference")
        if ref is not None and checked.references is not None:
            self.spill.note_references(
                [
                    (raw.row_numbers[p], value, raw.data[ref][p])
                    for p, value in enumerate(checked.references)
                    if value is not None
                ]
            )
        self.total += len(raw.row_numbers)


def _stream(
    reader: Iterator[list[str]],
    spill: RowSink,
    options: IntakeOptions,
    limits: ParseLimits,
    chunk_rows: int,
    max_rows: int,
    name: str,
) -> StreamedSheet:
    old_limit = csv.field_size_limit(FIELD_LIMIT)
    read = _Chunks(spill, options, limits)
    chunk: list[list[str]] = []
    numbers: list[int] = []
    line = 1
    try:
        for record in reader:
            if read.header is None:
                if not all(_blank(v) for v in record):
                    read.header, read.header_line = record, line
            else:
                chunk.append(record)
                numbers.append(line)
                if len(chunk) >= chunk_rows:
                    read.validate(chunk, numbers)
                    if read.total > max_rows:
                        raise IntakeError(f"the csv has more than {max_rows:,} data rows; split it")
                    chunk, numbers = [], []
            line = reader.line_num + 1  # type: ignore[attr-defined]
        if read.header is None:
            raise IntakeError("the sheet is empty: no header row")
        read.validate(chunk, numbers)
    except csv.Error as exc:
        raise IntakeError(f"the csv cannot be read near line {line}: {exc}") from exc
    finally:
        csv.field_size_limit(old_limit)
    cols = read.cols
    if cols is None or not read.total:
        raise IntakeError("the sheet has a header but no data rows")
    _cross_row_checks(spill, cols)
    return StreamedSheet(
        source=name,
        content_sha256="",
        rows_total=read.total,
        columns=cols.names,
        mapped=cols.cmap.headers(cols.names),
        ignored=cols.cmap.ignored(cols.names),
        currency=cols.cmap.currency,
        currency_header=cols.cmap.currency_header,
    )


def _cross_row_checks(spill: RowSink, cols: _Columns) -> None:
    """What `validate_sheet` compares across rows, over the whole sheet: a reference used on several rows
    refuses each of them; then the same destination and amount on several valid rows warns on each."""
    if cols.reference is not None:
        errors = _flagged(spill.repeated_references(), cols.names, cols.reference, repeated_reference)
        spill.add_issues("error", errors)
        if errors:
            spill.drop({issue.row for issue, _ in errors})
    if cols.destination is not None:
        warnings = _flagged(spill.repeated_payees(), cols.names, cols.destination, repeated_payee)
        spill.add_issues("warning", warnings)


def _flagged(
    groups: Iterator[list[tuple[int, str]]], names: list[str], column: int, message: Callable[[str, str], str]
) -> list[tuple[RowIssue, int]]:
    """One issue per row of each group: ``message(its cell, the group's other rows)``."""
    found = []
    for group in groups:
        rows = [r for r, _ in group]
        for r, cell in group:
            others = rows_list([x for x in rows if x != r])
            found.append((RowIssue(r, names[column], shorten(cell), message(cell, others)), column))
    return found


__all__ = ["CHUNK_ROWS", "MAX_BYTES", "MAX_ROWS", "StreamedSheet", "stream_csv", "streams"]
