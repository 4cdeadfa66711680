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
_NUMBER_AFTER_SIGN = re.compile(r"(?=[^0-9]*[0-9])[0-9 ().-]+").fullmatch
"""What may follow a leading + or - for the text to be a number or a phone number, not a formula: digits,
spaces, dashes, dots and parentheses, at least one digit."""
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

The guard itself is one rule for csv and xlsx (:func:`formula_like`): text starting with = @ tab or CR is
guarded; text starting with + or - is guarded unless the rest is a plain number or phone number (digits,
spaces, dashes, dots, parentheses): ``-12.50``, ``+233241234567`` and ``+233 24 123 4567`` go without the
apostrophe (they cannot call a function or reach outside the sheet, and finance copies them as they are),
``-2+3`` and ``+cmd|' /C calc'!A0`` keep it. In the xlsx reports such a signed number also carries Excel's
quote-prefix style (``quote_prefixed``), so editing the cell keeps it text.
"""


def formula_like(text: str) -> bool:
    """Whether a spreadsheet would take ``text`` for a formula: it starts with = @ tab or CR, or with + or -
    followed by anything but a plain number or phone number (``-12.50``, ``+233 24 123 4567``: not formulas;
    ``-2+3``: a formula). The one statement of the guard's rule (:data:`READ_BACK_RULE`)."""
    first = text[:1]
    if first not in _RISKY:
        return False
    return first not in "+-" or _NUMBER_AFTER_SIGN(text[1:]) is None


def neutralise(value: Any) -> Any:
    """Defuse spreadsheet formula injection: text a spreadsheet would take for a formula
    (:func:`formula_like`) is prefixed with an apostrophe; a signed number or phone number is not.

    The one place of this rule: every xlsx and csv report cell and header goes through it (``safe_cell``,
    ``safe_row``, ``write_csv``, ``tasks.reports.table_workbook``); sheets payops reads back do not
    (:data:`READ_BACK_RULE`)."""
    if isinstance(value, str) and formula_like(value):
        return "'" + str(value)
    return value


def quote_prefixed(text: str) -> bool:
    """Whether an xlsx text cell is a signed number left unguarded (``+233 24 123 4567``, ``-5``): written
    as it is with Excel's quote-prefix style, so editing it in Excel keeps it text rather than a formula."""
    return text[:1] in ("+", "-") and not formula_like(text)


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
    """:func:`safe_row` for a csv line (the same rule: ``READ_BACK_RULE``)."""
    return safe_row(values)


def write_csv(path: str, headers: Sequence[Any], rows: Iterable[Sequence[Any]]) -> None:
    """A csv report at ``path`` (local path or fsspec URL): the header line and every cell neutralised, as
    in the xlsx reports (a column header can carry a formula as well as a cell). Rows are streamed through a
    temporary file, so a failed report leaves no half-written file and no copy of the rows is held."""
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
