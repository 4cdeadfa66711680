"""Builders for test sheets: openpyxl/csv for ordinary files, hand-made zip parts for hostile ones."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openpyxl import Workbook

HEADER = ["reference", "amount", "currency", "provider", "destination", "payee name", "note"]
GOOD = ["PAY-001", "150.00", "GHS", "mtn", "0241234567", "Ama Mensah", "March stipend"]


def rows_with(**changes: Any) -> list[list[Any]]:
    """Header + one good row, with cells of that row replaced by column name (``payee_name=…``)."""
    row = list(GOOD)
    for name, value in changes.items():
        row[HEADER.index(name.replace("_", " "))] = value
    return [HEADER, row]


def write_xlsx(
    path: Path,
    rows: Sequence[Sequence[Any]],
    *,
    sheet: str = "payouts",
    formats: dict[str, str] | None = None,
    merge: str | None = None,
    before: Callable[[Workbook], None] | None = None,
) -> Path:
    """An xlsx with one sheet holding ``rows``; ``formats`` maps cell refs to number formats."""
    book = Workbook()
    if before is not None:
        before(book)
    ws = book.active if before is None else book.create_sheet(sheet)
    ws.title = sheet
    for row in rows:
        ws.append(list(row))
    for ref, number_format in (formats or {}).items():
        ws[ref].number_format = number_format
    if merge:
        ws.merge_cells(merge)
    book.save(path)
    return path


def write_csv(path: Path, rows: Sequence[Sequence[Any]], *, delimiter: str = ",", bom: bool = False) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buffer.getvalue().encode("utf-8"))
    return path


def rewrite_parts(
    path: Path, change: Callable[[str, bytes], bytes | None], extra: dict[str, bytes] | None = None
) -> Path:
    """Rewrite a zip's members through ``change(name, data)`` (``None`` keeps them) and add ``extra`` ones."""
    source = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            changed = change(info.filename, data)
            target.writestr(info.filename, data if changed is None else changed)
        for name, data in (extra or {}).items():
            target.writestr(name, data)
    path.write_bytes(out.getvalue())
    return path


def with_sheet_xml(path: Path, edit: Callable[[bytes], bytes]) -> Path:
    """Edit the first worksheet's XML of an existing xlsx."""
    return rewrite_parts(path, lambda name, data: edit(data) if name == "xl/worksheets/sheet1.xml" else None)
