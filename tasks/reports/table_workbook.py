"""A streaming xlsx writer for table reports: sheets of a bold frozen header and rows, some rows shaded.

Why not XlsxWriter here (it still writes the validation report): a 100,000-row payout report has 1.8 million
cells, and XlsxWriter's (or openpyxl's) Python per cell alone exceeds the report phase's budget
(docs/performance.md, *Writing reports*). A table report needs only a small, fixed part of SpreadsheetML:
text/number/boolean cells, one bold font, solid fills, column widths and a frozen first row. This module
writes exactly that, one row's XML per string join, streamed as rows come, so neither the rows nor the sheet
are held in memory. The output reads back
in openpyxl and calamine the same as XlsxWriter's (tests/tasks/test_table_workbook.py compares them).

Cells go through :func:`tasks.reports.xlsx.neutralise` (formula injection) like every report cell; text is
written as inline strings and never interpreted as a formula, number or link (a signed number such as a phone
number ``+233 24 123 4567`` keeps its text with Excel's quote-prefix style instead of an apostrophe,
:func:`tasks.reports.xlsx.quote_prefixed`). A ``Decimal`` is written as a number in a two-decimal currency
format (``#,##0.00``) and a ``datetime`` as an Excel date-time (UTC, ``yyyy-mm-dd hh:mm:ss``), so SUM, pivot
tables and date filters work on them; the header of such a column says the zone. A :class:`PlainNumber` (a
sheet's own number echoed in a report: a count, an amount of another kind) is a number in the General format,
its decimal text written as it is.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from itertools import chain, islice
from typing import IO, Any

import fsspec
from payops.tasks.reports.xlsx import HIGHLIGHT, neutralise, quote_prefixed, safe_cell
from xlsxwriter.utility import xl_col_to_name as column_letter

__all__ = ["SHEET_ROWS", "PlainNumber", "TableWorkbook", "table_workbook"]

SHEET_ROWS = 1_048_575
"""Data rows a sheet holds under its header (Excel's 1,048,576 rows)."""
_MAX_TEXT = 32_767
"""Excel's longest cell text (XlsxWriter truncates to it too)."""
_XML_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]|_x[0-9A-Fa-f]{4}_")
"""What XML 1.0 cannot hold (written as Excel's ``_xHHHH_``) and text that looks like such an escape."""
_PLAIN = re.compile(r"[^=+\-@\s&<>\x00-\x1f_][^&<>\x00-\x08\x0b\x0c\x0e-\x1f_]{0,32766}(?<!\s)\Z").match
"""Text written as it is (most cells): no formula start, nothing to escape, no edge spaces, within 32,767."""
_INVALID_TITLE = re.compile(r"[\[\]:*?/\\]")
_ROWS_PER_WRITE = 500
_NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_REL_NS = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
_PKG_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_CT = "application/vnd.openxmlformats-officedocument.spreadsheetml"
_BOLD = ' s="1"'
_PKG_NS = "http://schemas.openxmlformats.org/package/2006"
_PKG_CT = "application/vnd.openxmlformats-package"
_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
MONEY_FORMAT = "#,##0.00"
DATETIME_FORMAT = "yyyy-mm-dd hh:mm:ss"
_NUMBER_FORMATS = {MONEY_FORMAT: 164, DATETIME_FORMAT: 165}
"""Custom number formats (ids from 164 up, as Excel numbers its own)."""
_EXCEL_EPOCH = datetime(1899, 12, 30)


class PlainNumber(Decimal):
    """A number cell in the General format (not money's two decimals), its digits exactly as given."""

    __slots__ = ()


def _relationships(*targets: tuple[str, str]) -> str:
    """A relationships part: (type, target) pairs as rId1, rId2, ..."""
    rels = "".join(
        f'<Relationship Id="rId{i}" Type="{_PKG_REL}/{kind}" Target="{target}"/>'
        for i, (kind, target) in enumerate(targets, 1)
    )
    return f'{_HEAD}<Relationships xmlns="{_PKG_NS}/relationships">{rels}</Relationships>'


def _escape_controls(text: str) -> str:
    """As XlsxWriter: control characters as ``_xHHHH_``, a literal ``_xHHHH_`` with its ``_`` escaped."""
    return _XML_CONTROL.sub(
        lambda m: "_x005F" + m.group(0) if len(m.group(0)) > 1 else f"_x{ord(m.group(0)):04X}_", text
    )


def _text_cell(ref: str, text: str, style: str, guard: bool = True, quoted: str | None = None) -> str:
    """An inline string, through the formula guard unless ``guard`` is off (read-back sheets); ``quoted`` is
    the style to use instead of an apostrophe for a signed number (a cell people open)."""
    if guard:
        if quoted is not None and quote_prefixed(text):
            style = quoted
        else:
            text = neutralise(text)
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT]
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if _XML_CONTROL.search(text):
        text = _escape_controls(text)
    space = ' xml:space="preserve"' if text[:1].isspace() or text[-1:].isspace() else ""
    return f'<c r="{ref}"{style} t="inlineStr"><is><t{space}>{text}</t></is></c>'


def _excel_time(moment: datetime) -> str:
    """A date-time as Excel's serial number (days since 1899-12-30), in UTC when it carries a zone."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return f"{(moment - _EXCEL_EPOCH).total_seconds() / 86400:.16G}"


def _cell(
    ref: str, value: Any, style: str, typed: Callable[[str], str] | None = None, guard: bool = True
) -> str:
    """One ``<c>`` element; None and "" are blank, written only to carry a style (as in XlsxWriter).

    ``typed(kind)`` gives the style of a money, date-time or quote-prefixed cell in this row (kind ``money``,
    ``datetime`` or ``quoted``); without it such values are written as text. ``guard``: text goes through
    the formula guard (`tasks.reports.xlsx.neutralise`), off for read-back sheets."""
    kind = type(value)
    if kind is str and value:
        return _text_cell(ref, value, style, guard, typed("quoted") if typed else None)
    if typed is not None:
        if kind is Decimal and value.is_finite():
            return f'<c r="{ref}"{typed("money")}><v>{value:f}</v></c>'
        if kind is PlainNumber and value.is_finite():
            return f'<c r="{ref}"{style}><v>{value:f}</v></c>'
        if kind is datetime:
            return f'<c r="{ref}"{typed("datetime")}><v>{_excel_time(value)}</v></c>'
    if value is None or value == "":
        return f'<c r="{ref}"{style}/>' if style else ""
    if kind is bool:
        return f'<c r="{ref}"{style} t="b"><v>{int(value)}</v></c>'
    if kind is int or kind is float:
        if math.isnan(value) or math.isinf(value):
            error = "#NUM!" if math.isnan(value) else "#DIV/0!"
            return f'<c r="{ref}"{style} t="e"><f>{error}</f><v>{error}</v></c>'
        return f'<c r="{ref}"{style}><v>{value:.16G}</v></c>'
    return _text_cell(ref, str(safe_cell(value) if guard else value), style, guard)


def _width(header: Any) -> str:
    """The column width XlsxWriter writes for ``set_column(width=min(40, max(10, len(header) + 2)))``."""
    chars = min(40, max(10, len(str(header)) + 2))
    pixels = int(chars * 7 + 0.5) + 5
    return f"{(pixels * 256 // 7) / 256.0:.16g}"


def _cols(widths: list[str]) -> str:
    """``<col>`` elements, adjacent columns of one width in one element (as XlsxWriter groups them)."""
    out, start = [], 0
    for i, w in enumerate(widths):
        if i + 1 == len(widths) or widths[i + 1] != w:
            out.append(f'<col min="{start + 1}" max="{i + 1}" width="{w}" customWidth="1"/>')
            start = i + 1
    return "".join(out)


class TableWorkbook:
    """An xlsx being written to a file, one sheet at a time (see the module docstring)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._zip = zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=1)
        self._titles: list[str] = []
        self._fills: list[str] = []
        # Formats after the default (0) and the bold header (1): (number format id, fill id, quote prefix)
        self._xfs: list[tuple[int, int, bool]] = []

    def _xf(self, number_format: int, fill_id: int, quote: bool = False) -> str:
        """The ``s`` attribute of a cell format (fill id 0: none; fills of `_style_of_fill` from 2)."""
        key = (number_format, fill_id, quote)
        if key not in self._xfs:
            self._xfs.append(key)
        return f' s="{2 + self._xfs.index(key)}"'

    def _fill_id(self, fill: str) -> int:
        colour = fill.lstrip("#").upper()
        if colour not in self._fills:
            self._fills.append(colour)
        return 2 + self._fills.index(colour)

    def _style_of_fill(self, fill: str) -> str:
        """The ``s`` attribute of a solid ``fill`` (``#RRGGBB``); style 1 is the bold header."""
        return self._xf(0, self._fill_id(fill))

    def _typed(self, fill_id: int) -> Callable[[str], str]:
        """Styles of the typed cells of a row with fill ``fill_id`` (0: none), by kind (see `_cell`)."""
        styles = {
            "money": self._xf(_NUMBER_FORMATS[MONEY_FORMAT], fill_id),
            "datetime": self._xf(_NUMBER_FORMATS[DATETIME_FORMAT], fill_id),
            "quoted": self._xf(0, fill_id, True),
        }
        return styles.__getitem__

    def add_sheet(
        self,
        title: str,
        headers: Sequence[Any],
        rows: Iterable[Sequence[Any]],
        *,
        highlight: Sequence[bool] | Callable[[Sequence[Any]], bool] | None = None,
        fill: str = HIGHLIGHT,
        read_back: bool = False,
    ) -> int:
        """Append a sheet: a bold, frozen header row, then ``rows`` as they come; a row flagged by
        ``highlight`` (a flag per row, or a test of a row) is filled with ``fill``; returns the row count.

        ``read_back``: a sheet payops reads again (the resubmit sheet): its text is written as it is, without
        the formula guard (`tasks.reports.xlsx.READ_BACK_RULE`); inline strings are never evaluated anyway."""
        guard = not read_back
        if not title or len(title) > 31 or _INVALID_TITLE.search(title) or title in self._titles:
            raise ValueError(f"invalid or repeated sheet title {title!r}")
        self._titles.append(title)
        shaded = self._style_of_fill(fill)
        typed_plain, typed_shaded = self._typed(0), self._typed(self._fill_id(fill))
        flagged: Callable[[int, Sequence[Any]], bool]
        if highlight is None:
            flagged = lambda i, row: False  # noqa: E731
        elif callable(highlight):
            test = highlight
            flagged = lambda i, row: test(row)  # noqa: E731
        else:
            marks = highlight
            flagged = lambda i, row: marks[i]  # noqa: E731
        letters = [column_letter(i) for i in range(max(len(headers), 1))]
        cols = _cols([_width(h) for h in headers])
        selected = ' tabSelected="1"' if len(self._titles) == 1 else ""
        count, widest = 0, len(headers)
        # The rows go to a temporary file first: the sheet's <dimension>, which openpyxl's read-only mode
        # trusts for the row count, comes before them and is known only at the end.
        with tempfile.TemporaryFile() as body:
            chunk: list[str] = []
            for count, row in enumerate(rows, start=1):
                if len(row) > len(letters):
                    letters += [column_letter(i) for i in range(len(letters), len(row))]
                widest = max(widest, len(row))
                if flagged(count - 1, row):
                    style, typed = shaded, typed_shaded
                else:
                    style, typed = "", typed_plain
                r = count + 1
                cells = "".join(
                    [
                        f'<c r="{c}{r}"{style} t="inlineStr"><is><t>{v}</t></is></c>'
                        if type(v) is str and _PLAIN(v)
                        else _cell(f"{c}{r}", v, style, typed, guard)
                        for c, v in zip(letters, row, strict=False)
                    ]
                )
                chunk.append(f'<row r="{r}">{cells}</row>')
                if len(chunk) == _ROWS_PER_WRITE:
                    body.write("".join(chunk).encode())
                    chunk.clear()
            body.write("".join(chunk).encode())
            body.seek(0)
            header = "".join(
                _cell(f"{c}1", h, _BOLD, guard=guard) for c, h in zip(letters, headers, strict=False)
            )
            with self._zip.open(f"xl/worksheets/sheet{len(self._titles)}.xml", "w", force_zip64=True) as out:
                out.write(
                    (
                        f'{_HEAD}<worksheet {_NS} {_REL_NS}><dimension ref="A1:{column_letter(widest - 1)}'
                        f'{count + 1}"/><sheetViews><sheetView{selected} workbookViewId="0">'
                        '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
                        '<selection pane="bottomLeft"/></sheetView></sheetViews>'
                        f'<sheetFormatPr defaultRowHeight="15"/><cols>{cols}</cols><sheetData>'
                        f'<row r="1">{header}</row>'
                    ).encode()
                )
                shutil.copyfileobj(body, out, 1024 * 1024)
                out.write(
                    b'</sheetData><pageMargins left="0.7" right="0.7" top="0.75" bottom="0.75" header="0.3" '
                    b'footer="0.3"/></worksheet>'
                )
        return count

    def add_long_sheet(
        self,
        title: str,
        headers: Sequence[Any],
        rows: Iterable[Sequence[Any]],
        *,
        highlight: Callable[[Sequence[Any]], bool] | None = None,
        read_back: bool = False,
    ) -> int:
        """`add_sheet` for a table that may hold more rows than a sheet (`SHEET_ROWS` under its header): the
        rest continue on sheets "TITLE 2", "TITLE 3"... with the same header; returns the row count."""
        remaining = iter(rows)
        total, part = 0, 1
        while True:
            first = next(remaining, None)
            if first is None and part > 1:
                return total
            some = [] if first is None else chain([first], islice(remaining, SHEET_ROWS - 1))
            name = title if part == 1 else f"{title} {part}"
            total += self.add_sheet(name, headers, some, highlight=highlight, read_back=read_back)
            part += 1

    def discard(self) -> None:
        """Stop writing (the file is thrown away)."""
        self._zip.close()

    def close(self) -> None:
        """Write the workbook's parts besides the sheets and finish the zip."""
        n = len(self._titles)
        if not n:
            raise ValueError("a workbook needs at least one sheet")
        sheet_types = "".join(
            f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{_CT}.worksheet+xml"/>'
            for i in range(1, n + 1)
        )
        self._zip.writestr(
            "[Content_Types].xml",
            f'{_HEAD}<Types xmlns="{_PKG_NS}/content-types">'
            f'<Default Extension="rels" ContentType="{_PKG_CT}.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{_CT}.sheet.main+xml"/>'
            f'<Override PartName="/xl/styles.xml" ContentType="{_CT}.styles+xml"/>{sheet_types}</Types>',
        )
        self._zip.writestr("_rels/.rels", _relationships(("officeDocument", "xl/workbook.xml")))
        sheet_rels = [("worksheet", f"worksheets/sheet{i}.xml") for i in range(1, n + 1)]
        self._zip.writestr(
            "xl/_rels/workbook.xml.rels", _relationships(*sheet_rels, ("styles", "styles.xml"))
        )
        sheets = "".join(
            f'<sheet name="{t}" sheetId="{i}" r:id="rId{i}"/>' for i, t in enumerate(self._titles, 1)
        )
        self._zip.writestr(
            "xl/workbook.xml",
            f"{_HEAD}<workbook {_NS} {_REL_NS}><bookViews><workbookView/></bookViews>"
            f"<sheets>{sheets}</sheets></workbook>",
        )
        fills = "".join(
            f'<fill><patternFill patternType="solid"><fgColor rgb="FF{c}"/><bgColor indexed="64"/>'
            "</patternFill></fill>"
            for c in self._fills
        )
        xfs = "".join(
            f'<xf numFmtId="{fmt}" fontId="0" fillId="{fill}" borderId="0" xfId="0"'
            + (' applyNumberFormat="1"' if fmt else "")
            + (' applyFill="1"' if fill else "")
            + (' quotePrefix="1"' if quote else "")
            + "/>"
            for fmt, fill, quote in self._xfs
        )
        formats = "".join(
            f'<numFmt numFmtId="{i}" formatCode="{code}"/>' for code, i in _NUMBER_FORMATS.items()
        )
        self._zip.writestr(
            "xl/styles.xml",
            f'{_HEAD}<styleSheet {_NS}><numFmts count="{len(_NUMBER_FORMATS)}">{formats}</numFmts>'
            '<fonts count="2">'
            '<font><sz val="11"/><color theme="1"/><name val="Calibri"/><family val="2"/></font>'
            '<font><b/><sz val="11"/><color theme="1"/><name val="Calibri"/><family val="2"/></font></fonts>'
            f'<fills count="{2 + len(self._fills)}"><fill><patternFill patternType="none"/></fill>'
            f'<fill><patternFill patternType="gray125"/></fill>{fills}</fills>'
            '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
            '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
            f'<cellXfs count="{2 + len(self._xfs)}">'
            '<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
            f'<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/>{xfs}'
            '</cellXfs><cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
            "</styleSheet>",
        )
        self._zip.close()


@contextmanager
def table_workbook(path: str) -> Iterator[TableWorkbook]:
    """A :class:`TableWorkbook` saved to ``path`` (local path or fsspec URL) when the block ends without an
    error; written to a temporary file meanwhile, so a failed report leaves no half-written file."""
    with tempfile.TemporaryFile() as tmp:
        book = TableWorkbook(tmp)
        try:
            yield book
        except BaseException:
            book.discard()
            raise
        book.close()
        tmp.seek(0)
        with fsspec.open(path, "wb") as fh:
            shutil.copyfileobj(tmp, fh, 1024 * 1024)
