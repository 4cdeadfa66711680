"""The workbook's shape, measured cheaply before anything parsed from it is used (dimension, structure bombs).

calamine allocates a sheet's whole rectangle, from A1 to its farthest cell, at 32 bytes a cell: one cell at
XFD1048576 in a 1.6 KB file asks for 512 GiB. ``safety.check_xlsx`` streams every XML part through a
:class:`ShapeScan` (fed the same 1 MiB chunks it already reads) and :func:`refuse_absurd_shape` refuses:

* a worksheet whose declared ``<dimension ref>`` or written extent is over ``max_cells`` cells. The written
  extent comes from the ``r="…"`` references of rows and cells, found by one search that only matches the
  rare ones: columns of two or more letters (AA and beyond) and rows of six or more digits (100000 and
  beyond). A sheet with neither is at most Z99999 (2.6 million cells). When the bound from those matches is
  over the limit, every reference is read (slower, only for wide or tall sheets) to get the exact extent;
* more than ``max_sheets`` sheets; a shared-string table declaring or holding more than
  ``max_shared_strings`` strings (calamine reserves room for the declared count);
* XML nested deeper than ``max_xml_depth``. The depth is counted from ``<``, ``</``, ``/>``, ``<?`` and
  ``<!`` at most 256 points per part (every 4 KiB or every 1/256 of the part, cut after a ``>``), so deep
  nesting is seen from a few hundred levels in a small part; in a large part from about part size / 800
  levels. No parser payops uses recurses on depth; the limit refuses absurd files early, and the parser
  child's memory limit stays the backstop.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass

from .errors import IntakeError
from .options import IntakeOptions

# One pass for both rare kinds of reference: a wide one (AA and beyond: its letters, then its digits) or a
# tall one (row 100000 and beyond: its digits). Possessive: an ordinary reference fails without backtracking.
_WIDE_OR_TALL = re.compile(rb'r="(?:([A-Z]{2,3})(\d+)|[A-Z]?+(\d{6,}))')
_ANY_REF = re.compile(rb'r="([A-Z]{0,3})(\d+)"')
_DIMENSION = re.compile(rb'<(?:[A-Za-z_][\w.-]*:)?dimension\b[^>]*?\bref="([^"]*)"')
_RANGE_END = re.compile(r"([A-Z]{0,3})(\d*)$")
_SHEET = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?sheet[\s/>]")
_SST_COUNTS = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?sst\b[^>]*>")
_COUNT_ATTR = re.compile(rb'\b(?:count|uniqueCount)="(\d+)"')
_NARROW_COLUMNS = 26
_SHORT_ROWS = 99_999
_STEP = 4096
_STEPS_PER_PART = 256


def column_number(letters: str) -> int:
    """``A`` → 1, ``XFD`` → 16384 (0 for no letters)."""
    number = 0
    for ch in letters:
        number = number * 26 + ord(ch) - 64
    return number


def _cells(columns: int, rows: int) -> int:
    return max(columns, 1) * max(rows, 1)


@dataclass
class _Part:
    name: str
    size: int
    depth: int = 0
    max_depth: int = 0
    carry: bytes = b""
    wide: int = 0
    tall: int = 0
    declared: tuple[int, int] | None = None
    sheets: int = 0
    strings_declared: int = 0
    strings: int = 0


class ShapeScan:
    """Shape figures of one xlsx, gathered from the chunks of its XML parts."""

    def __init__(self) -> None:
        self.parts: list[_Part] = []

    def start(self, name: str, size: int) -> None:
        self.parts.append(_Part(name=name, size=size))

    def feed(self, chunk: bytes, seam: bytes) -> None:
        """One chunk of the current part and its seam with the previous chunk (for the searches)."""
        part = self.parts[-1]
        self._depth(part, chunk)
        lower = part.name.lower()
        if lower.startswith("xl/worksheets/"):
            for window in (chunk, seam):
                if b"dimension" in window and (m := _DIMENSION.search(window)):
                    part.declared = _range_size(m.group(1).decode("ascii", "replace"))
                for letters, wide_row, tall_row in _WIDE_OR_TALL.findall(window):
                    if letters:
                        part.wide = max(part.wide, column_number(letters.decode()))
                    row = tall_row or wide_row
                    if len(row) > 5:
                        part.tall = max(part.tall, int(row))
        elif lower == "xl/workbook.xml":
            part.sheets += len(_SHEET.findall(chunk))
        elif lower.startswith("xl/sharedstrings"):
            if not part.strings_declared and (m := _SST_COUNTS.search(chunk)):
                part.strings_declared = max(map(int, _COUNT_ATTR.findall(m.group(0))), default=0)
            part.strings += chunk.count(b"<si>") + chunk.count(b"<si ") + chunk.count(b":si>")

    @staticmethod
    def _depth(part: _Part, chunk: bytes) -> None:
        text = part.carry + chunk
        cut = text.rfind(b">") + 1  # counted up to the last '>': no token is split between two counts
        part.carry = text[cut:][-_STEP:]
        step = max(_STEP, part.size // _STEPS_PER_PART)
        # "<?" and "<!" (declarations, comments, CDATA) are rare: a one-byte search (memchr) of the chunk
        # spares their two-byte counts where the chunk has no "?" or "!" at all.
        questions, bangs = b"?" in text, b"!" in text
        start = 0
        while start < cut:
            end = text.find(b">", start + step) + 1 or cut
            end = min(end, cut)
            count = text.count
            opened = count(b"<", start, end)
            if questions:
                opened -= count(b"<?", start, end)
            if bangs:
                opened -= count(b"<!", start, end)
            closed = 2 * count(b"</", start, end) + count(b"/>", start, end)
            part.depth += opened - closed
            part.max_depth = max(part.max_depth, part.depth)
            start = end


def _range_size(ref: str) -> tuple[int, int] | None:
    """Columns and rows of a range from A1 to the end of ``ref`` (``A1:XFD1048576`` → 16384, 1048576)."""
    end = _RANGE_END.search(ref.split(":")[-1].replace("$", "").upper())
    if end is None:
        return None
    return column_number(end.group(1)), int(end.group(2) or 0)


def _exact_extent(archive: zipfile.ZipFile, name: str) -> tuple[int, int]:
    """Farthest column and row named by any ``r=`` reference (the slow pass over every reference)."""
    columns = rows = 0
    tail = b""
    with archive.open(name) as stream:
        while chunk := stream.read(1024 * 1024):
            window = tail[-32:] + chunk
            tail = chunk
            for letters, digits in _ANY_REF.findall(window):
                columns = max(columns, column_number(letters.decode()))
                rows = max(rows, int(digits))
    return columns, rows


def refuse_absurd_shape(scan: ShapeScan, archive: zipfile.ZipFile, options: IntakeOptions) -> None:
    """IntakeError for a workbook whose shape no payout sheet has (see the module docstring)."""
    limit = options.max_cells
    for part in scan.parts:
        if part.max_depth > options.max_xml_depth:
            raise IntakeError(
                f"the xlsx part {part.name} nests XML elements more than {options.max_xml_depth} deep "
                "(Excel writes about 10); refused"
            )
        if part.sheets > options.max_sheets:
            raise IntakeError(
                f"the workbook has {part.sheets:,} sheets (limit {options.max_sheets:,}); refused"
            )
        strings = max(part.strings_declared, part.strings)
        if strings > options.max_shared_strings:
            raise IntakeError(
                f"the workbook's shared-string table has {strings:,} entries "
                f"(limit {options.max_shared_strings:,}); refused"
            )
        if part.declared is not None and _cells(*part.declared) > limit:
            columns, rows = part.declared
            raise IntakeError(
                f"the sheet in {part.name} declares a range up to column {columns:,} and row {rows:,} "
                f"({_cells(columns, rows):,} cells; limit {limit:,}); refused as a dimension bomb"
            )
        columns = part.wide or _NARROW_COLUMNS
        rows = part.tall or _SHORT_ROWS
        if _cells(columns, rows) > limit:
            columns, rows = _exact_extent(archive, part.name)
            if _cells(columns, rows) > limit:
                raise IntakeError(
                    f"the sheet in {part.name} has cells up to column {columns:,} and row {rows:,} "
                    f"({_cells(columns, rows):,} cells from A1; limit {limit:,}); refused as a dimension bomb"
                )
