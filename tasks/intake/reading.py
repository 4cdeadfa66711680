"""Reading a payout sheet (xlsx/xlsm/csv, local or fsspec URL) into validated rows.

The file's bytes are checked here (type, size, zip bomb, XML entities, dimension bombs: ``safety.py``), then
parsed in a resource-limited child process (``sandboxed.py``, code in ``parsing.py``), then validated here.
"""

from __future__ import annotations

import hashlib
import os

from payops.tasks.runtime.memory import gc_paused

from .columns import sheet_columns
from .errors import IntakeError, Located
from .models import IntakeResult, RowTable
from .options import IntakeOptions
from .parsing import SheetRefusal, column_letter
from .raw import RawSheet
from .safety import CheckedWorkbook, check_xlsx
from .sandboxed import start_parser
from .sources import SUPPORTED, extension, load_bytes, source_size
from .streaming import check_csv_size
from .structure import column_number
from .validation import validate_sheet


def read_payout_sheet(source: str | os.PathLike[str], options: IntakeOptions | None = None) -> IntakeResult:
    """Read and validate a payout sheet; raise :class:`IntakeError` for whole-file problems.

    ``source`` is a local path or an fsspec URL (``memory://x.xlsx``, ``file:///…``, ``s3://…``). Row problems
    are in ``result.errors`` (row and column as the operator sees them), doubts in ``result.warnings``.
    """
    options = options or IntakeOptions()
    with gc_paused():
        return _read(os.fspath(source), options)


def read_raw_sheet(source: str | os.PathLike[str], options: IntakeOptions | None = None) -> RawSheet:
    """Every cell of a sheet (xlsx/xlsm/csv, local path or fsspec URL) as text, after the same checks as
    :func:`read_payout_sheet` (file type, size, zip bomb, XML entities, formulas without a value, header);
    for sheets with their own columns and rules (utility purchases). IntakeError for whole-file problems."""
    options = options or IntakeOptions()
    with gc_paused():
        return _read_cells(os.fspath(source), options)[0]


def check_sheet_file(source: str | os.PathLike[str], options: IntakeOptions | None = None) -> None:
    """The checks a sheet passes before any parser sees it (type, size, zip bomb, XML entities, dimension
    bombs), without parsing; IntakeError when one fails. Cheap: for refusing before anything else starts."""
    options = options or IntakeOptions()
    name = os.fspath(source)
    ext = _supported_extension(name)
    if ext == ".csv":
        # A csv of any size up to the streamed limit may be paid (read in chunks: `streaming.streams`); its
        # text is checked as it is read.
        size = source_size(name)
        if size is None:
            load_bytes(name, options.max_bytes)  # says why it cannot be sized (missing, unreadable)
        elif size == 0:
            raise IntakeError("the file is empty")
        check_csv_size(size)
        return
    data = load_bytes(name, options.max_bytes)
    if not data:
        raise IntakeError("the file is empty")
    _check_workbook(data, ext, options)


def _supported_extension(name: str) -> str:
    ext = extension(name)
    if ext == ".xls":
        raise IntakeError("old Excel 97-2003 (.xls) files are not supported; save the sheet as .xlsx")
    if ext not in SUPPORTED:
        raise IntakeError(
            f"unsupported file type {ext or '(no extension)'!r}; upload .xlsx, .xlsm or .csv (UTF-8)"
        )
    return ext


def _read_cells(name: str, options: IntakeOptions) -> tuple[RawSheet, str]:
    """The sheet's cells as text and the SHA-256 of the file's bytes (hashed while the child parses)."""
    ext = _supported_extension(name)
    with start_parser(options) as parser:  # starting now: its interpreter start overlaps the read below
        data = load_bytes(name, options.max_bytes)
        if not data:
            raise IntakeError("the file is empty")
        # The child parses on one core while this process checks the file on the other. The checks still
        # decide: their refusal ends the child (leaving the block), and the cells are taken only after they
        # pass. What the child may do meanwhile with a hostile file is bounded by its own limits.
        parser.send("csv" if ext == ".csv" else "xlsx", data)
        checked = None if ext == ".csv" else _check_workbook(data, ext, options)
        digest = hashlib.sha256(data).hexdigest()
        try:
            raw = parser.result()
        except SheetRefusal as exc:
            if checked is not None and exc.sheet is not None:
                _refuse_uncached_formulas(checked, exc.sheet, None)
            raise IntakeError(str(exc)) from None
    if checked is not None:
        _refuse_uncached_formulas(checked, raw.sheet or "", raw)
    return raw, digest


def _check_workbook(data: bytes, ext: str, options: IntakeOptions) -> CheckedWorkbook:
    """The checks an xlsx passes before its parsed cells are used (``safety.check_xlsx``)."""
    if data.startswith(b"\xd0\xcf\x11\xe0"):
        raise IntakeError(
            "the file is not a valid xlsx (it is an old .xls or a password-protected workbook); "
            "save an unprotected .xlsx"
        )
    if not data.startswith(b"PK"):
        raise IntakeError(f"the file is not a valid {ext} (not a zip archive); save it from Excel as .xlsx")
    return check_xlsx(data, options)


def _refuse_uncached_formulas(checked: CheckedWorkbook, sheet: str, raw: RawSheet | None) -> None:
    """IntakeError locating the formulas without a saved value in ``sheet`` (calamine reads them as empty)."""
    part = checked.sheet_part(sheet)
    uncached = checked.uncached_formulas(part) if part is not None else []
    if not uncached:
        return
    raise IntakeError(
        f"formulas without a saved value in sheet {sheet!r} (cells {', '.join(uncached)}); "
        "the file was not saved by Excel: open it in Excel and save it again",
        [_locate(ref, raw) for ref in uncached if ref != "?"],
    )


def _locate(ref: str, raw: RawSheet | None) -> Located:
    """``"B4"`` → row 4 and column B's header text (``column B`` when it has none)."""
    letters = ref.rstrip("0123456789")
    index = column_number(letters) - 1
    column = f"column {column_letter(index)}"
    if raw is not None and raw.sheet_columns is not None and index in raw.sheet_columns:
        column = raw.columns[raw.sheet_columns.index(index)]
    return Located(row=int(ref[len(letters) :]), column=column)


def _read(name: str, options: IntakeOptions) -> IntakeResult:
    raw, digest = _read_cells(name, options)
    cmap = sheet_columns(raw.columns, options)
    checked = validate_sheet(raw, cmap, options)
    return IntakeResult(
        source=name,
        sheet=raw.sheet,
        content_sha256=digest,
        rows=checked.rows,
        errors=checked.errors,
        warnings=checked.warnings,
        rows_total=len(raw.row_numbers),
        columns=raw.columns,
        table=RowTable(raw.columns, raw.data, raw.row_numbers),
        mapped=cmap.headers(raw.columns),
        ignored=cmap.ignored(raw.columns),
        currency=cmap.currency,
        currency_header=cmap.currency_header,
    )
