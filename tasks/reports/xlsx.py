"""Report cells made safe (formula injection), csv reports, and the XlsxWriter workbook of the validation
report (cells with their own formats).

Table reports (a header and rows, some shaded: payout results, transactions, settlements, purchases) are
written by the streaming writer in ``tasks.reports.table_workbook`` (XlsxWriter is too slow per cell for
them). openpyxl remains what tests read reports with, and it writes the template (data validation, text
columns).
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import fsspec

if TYPE_CHECKING:
    from xlsxwriter.workbook import Workbook

HIGHLIGHT = "#FFF2CC"
"""Fill of rows that need attention (failed, refused, invalid)."""
_RISKY = frozenset("=+-@\t\r")
"""First characters a spreadsheet may run as a formula."""
_SIGNED_NUMBER = re.compile(r"[+-][0-9][0-9 ().-]*").fullmatch
"""Text that starts like a formula but holds only a sign, digits, spaces and number punctuation."""
_PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?").fullmatch
"""A plain number: an optional sign, digits, at most one decimal point. A spreadsheet opening a csv reads it
as a number, never as a formula (``-5.00``, ``+233241234567``)."""
_OPTIONS = {
    # Cells are data, never formulas, links or numbers guessed from text.
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "strings_to_numbers": False,
    "nan_inf_to_errors": True,
}


READ_BACK_RULE = """Where the formula guard applies (the one statement of the rule).

Report cells people open get it: every cell and header of the results, summary, validation, transactions,
settlement and purchase reports, xlsx and csv (``safe_cell``, ``safe_row``, ``write_csv``,
``payops.tasks.reports.table_workbook``). Values payops reads back never do: the report's ``resubmit`` sheet
and the retry sheet built from it (`payops.tasks.payouts.retry_sheet`) keep the sheet's own text ("+233 24 123
0001", "=Payroll"), because a guard character would change what the intake reads ("'+233…" is not a phone
number). Those are written only as xlsx inline-string cells (``TableWorkbook.add_sheet(read_back=True)``),
which no spreadsheet evaluates, so they stay safe to open; never as csv, which a spreadsheet would evaluate.

A csv cell that is a plain number (``-5.00``, ``+233241234567``: a sign, digits, one decimal point) goes
without the guard (``csv_row``): a spreadsheet reads it as a number, which can run nothing, and an apostrophe
there would make finance's ``-5.00`` text. Anything else starting with = + - @ tab or CR keeps it, a phone
number written with spaces included: Excel and LibreOffice evaluate ``+233 24 123 4567`` from a csv as a
formula (an error cell), so it stays ``'+233 24 123 4567``. In the xlsx reports such a signed number keeps its
text with the quote-prefix style instead (``quote_prefixed``).
"""


def neutralise(value: Any) -> Any:
    """Defuse spreadsheet formula injection: text starting with = + - @ (or tab, CR) is prefixed with a quote.

    The one place of this rule: every xlsx and csv report cell and header goes through it (``safe_cell``,
    ``safe_row``, ``write_csv``, ``tasks.reports.table_workbook``); sheets payops reads back do not
    (:data:`READ_BACK_RULE`)."""
    if type(value) is str:
        return "'" + value if value[:1] in _RISKY else value
    if isinstance(value, str) and value[:1] in _RISKY:  # str subclasses (enums)
        return "'" + str(value)
    return value


def quote_prefixed(text: str) -> bool:
    """Whether an xlsx text cell keeps ``text`` as it is, with Excel's quote-prefix style, instead of a
    leading apostrophe: a phone number ``+233 24 123 4567`` or ``-5`` (a sign, then digits, spaces and number
    punctuation only) cannot call a function or reach outside the sheet, and finance copies it without a stray
    apostrophe. Everything else that starts like a formula is neutralised (:func:`neutralise`); a csv has no
    quote prefix, so its cells keep the guard unless they are plain numbers (:func:`csv_row`)."""
    return _SIGNED_NUMBER(text) is not None


def safe_cell(value: Any) -> Any:
    """A spreadsheet-safe cell: text, numbers (money's Decimal too: a number is never a formula, and
    finance sums a csv's ``-29.48``, not ``'-29.48``) and None as they are (text neutralised); other values
    as text."""
    if value is None or isinstance(value, int | float | str | Decimal):
        return neutralise(value)
    return neutralise(str(value))


_NUMBERS = (int, float, Decimal)


def safe_row(values: Iterable[Any]) -> list[Any]:
    """Every value of a row (cells or a header row) through :func:`safe_cell` (plain text, None and numbers
    are checked inline: this runs for every cell of a 100,000-row csv report)."""
    return [
        v if (t := type(v)) is str and v[:1] not in _RISKY or v is None or t in _NUMBERS else safe_cell(v)
        for v in values
    ]


def csv_row(values: Iterable[Any]) -> list[Any]:
    """:func:`safe_row` for a csv line: a plain number keeps its sign, unguarded (``READ_BACK_RULE``)."""
    return [
        v
        if (t := type(v)) is str and (v[:1] not in _RISKY or _PLAIN_NUMBER(v)) or v is None or t in _NUMBERS
        else safe_cell(v)
        for v in values
    ]


def write_csv(path: str, headers: Sequence[Any], rows: Iterable[Sequence[Any]]) -> None:
    """A csv report at ``path`` (local path or fsspec URL): the header line and every cell neutralised, as
    in the xlsx reports (a column header can carry a formula as well as a cell), plain numbers excepted
    (:func:`csv_row`). Rows are streamed through a temporary file, so a failed report leaves no half-written
    file and no copy of the rows is held."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as tmp:
        writer = csv.writer(tmp)
        writer.writerow(csv_row(headers))
        writer.writerows(map(csv_row, rows))
        tmp.seek(0)
        with fsspec.open(path, "w", encoding="utf-8", newline="") as fh:
            shutil.copyfileobj(tmp, fh, 1024 * 1024)


@contextmanager
def report_workbook(path: str, *, large: bool = False) -> Iterator[Workbook]:
    """A workbook saved to ``path`` (local path or fsspec URL) when the block ends without an error.

    ``large``: stream rows to temporary files instead of holding them (for sheets over ~50k rows).
    """
    buffer = io.BytesIO()
    import xlsxwriter  # ~0.1 s to import, and only the validation report needs it

    book = xlsxwriter.Workbook(buffer, {**_OPTIONS, "constant_memory": large, "in_memory": not large})
    try:
        yield book
    finally:
        book.close()
    with fsspec.open(path, "wb") as fh:
        fh.write(buffer.getvalue())
