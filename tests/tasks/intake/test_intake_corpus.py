"""The malformed-sheet corpus: each pitfall gives its documented error: row, column, message; no traceback."""

from __future__ import annotations

import datetime as dt
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from intake_corpus import GOOD, HEADER, rewrite_parts, rows_with, with_sheet_xml, write_csv, write_xlsx
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet


@dataclass(frozen=True)
class FileCase:
    build: Callable[[Path], Path]
    message: str
    options: IntakeOptions | None = None


@dataclass(frozen=True)
class RowCase:
    build: Callable[[Path], Path]
    row: int
    column: str
    message: str
    options: IntakeOptions | None = None


def _xlsx(rows, **kw):
    return lambda d: write_xlsx(d / "sheet.xlsx", rows, **kw)


def _csv(rows, **kw):
    return lambda d: write_csv(d / "sheet.csv", rows, **kw)


def _bytes(name: str, data: bytes):
    def build(d: Path) -> Path:
        (d / name).write_bytes(data)
        return d / name

    return build


def _formula_sheet(d: Path) -> Path:
    # openpyxl stores formulas without a cached value, like any script-written file
    return write_xlsx(d / "sheet.xlsx", [HEADER, ["PAY-1", "=100+50", "GHS", "mtn", "0241234567", "", ""]])


def _zip_bomb(d: Path) -> Path:
    path = write_xlsx(d / "sheet.xlsx", rows_with())
    return rewrite_parts(path, lambda n, b: None, extra={"xl/bomb.xml": b" " * (30 * 1024 * 1024)})


def _entity_attack(d: Path) -> Path:
    path = write_xlsx(d / "sheet.xlsx", rows_with())
    doctype = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
    )
    return with_sheet_xml(path, lambda xml: doctype + xml[xml.index(b"<worksheet") :])


def _entity_in_shared_part(d: Path) -> Path:
    path = write_xlsx(d / "sheet.xlsx", rows_with())
    evil = (
        b'<?xml version="1.0"?>\n<!-- x -->\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'
    )
    return rewrite_parts(path, lambda n, b: evil if n == "docProps/app.xml" else None)


def _utf16_part(d: Path) -> Path:
    path = write_xlsx(d / "sheet.xlsx", rows_with())
    return rewrite_parts(path, lambda n, b: b.decode().encode("utf-16") if n == "xl/workbook.xml" else None)


def _not_a_workbook(d: Path) -> Path:
    path = d / "sheet.xlsx"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("word/document.xml", "<document/>")
    return path


def _merged_header(d: Path) -> Path:
    rows = [["reference", "amount", None, "provider", "destination"], ["P1", 10, "GHS", "mtn", "0241234567"]]
    return write_xlsx(d / "sheet.xlsx", rows, merge="B1:C1")


def _hidden_payouts(d: Path) -> Path:
    def hide(book):
        book.active.title = "notes"
        book.active.append(["nothing to pay here"])

    path = write_xlsx(d / "sheet.xlsx", rows_with(), before=hide)
    from openpyxl import load_workbook

    book = load_workbook(path)
    book["payouts"].sheet_state = "hidden"
    book.save(path)
    return path


def _date_amount(d: Path) -> Path:
    return write_xlsx(d / "sheet.xlsx", rows_with(amount=dt.date(2024, 3, 15)), formats={"B2": "yyyy-mm-dd"})


def _date_number_amount(d: Path) -> Path:
    # a typed 45000 in a cell formatted as a date: calamine reports the date Excel shows
    return write_xlsx(d / "sheet.xlsx", rows_with(amount=45000), formats={"B2": "dd/mm/yyyy"})


def _float_artefact(d: Path) -> Path:
    # =0.1+0.2 saved by Excel: the cell holds the binary sum, Excel shows 0.30
    path = write_xlsx(d / "sheet.xlsx", rows_with(amount=0.5))
    return with_sheet_xml(path, lambda xml: xml.replace(b"<v>0.5</v>", b"<v>0.30000000000000004</v>"))


LONG = "x" * 10_000

FILE_CASES: dict[str, FileCase] = {
    "pdf extension": FileCase(_bytes("payouts.pdf", b"%PDF-1.4"), "unsupported file type '.pdf'"),
    "no extension": FileCase(_bytes("payouts", b"a,b"), "unsupported file type '(no extension)'"),
    "old xls": FileCase(_bytes("payouts.xls", b"\xd0\xcf\x11\xe0rest"), "old Excel 97-2003 (.xls)"),
    "xlsx not a zip": FileCase(_bytes("payouts.xlsx", b"amount,currency\n1,GHS\n"), "not a zip archive"),
    "xlsx is OLE (password-protected)": FileCase(
        _bytes("payouts.xlsx", b"\xd0\xcf\x11\xe0" + b"\0" * 100), "password-protected"
    ),
    "damaged zip": FileCase(_bytes("payouts.xlsx", b"PK\x03\x04garbage"), "damaged zip archive"),
    "zip but not a workbook": FileCase(_not_a_workbook, "not an Excel workbook"),
    "csv that is an xlsx": FileCase(
        lambda d: write_xlsx(d / "x.xlsx", rows_with()).rename(d / "x.csv"), "is an Excel workbook"
    ),
    "empty xlsx file": FileCase(_bytes("payouts.xlsx", b""), "the file is empty"),
    "empty csv file": FileCase(_bytes("payouts.csv", b""), "the file is empty"),
    "blank csv": FileCase(_bytes("payouts.csv", b"\r\n ; \r\n"), "is empty: no header row"),
    "empty workbook": FileCase(_xlsx([]), "'payouts' is empty: no header row"),
    "header only": FileCase(_xlsx([HEADER]), "has a header but no data rows"),
    "header and blank rows only": FileCase(
        _csv([HEADER, [], ["", " ", "\xa0"]]), "has a header but no data rows"
    ),
    "merged header cells": FileCase(_merged_header, "header row (row 1) has merged cells (B1:C1)"),
    "hidden payouts sheet": FileCase(_hidden_payouts, "the sheet 'payouts' is hidden"),
    "formula without cached value": FileCase(
        _formula_sheet, "formulas without a saved value in sheet 'payouts' (cells B2)"
    ),
    "zip bomb (compression ratio)": FileCase(_zip_bomb, "refused as a possible zip bomb"),
    "zip bomb (total size)": FileCase(
        lambda d: write_xlsx(d / "s.xlsx", rows_with()),
        "would expand to",
        IntakeOptions(max_uncompressed_bytes=1000),
    ),
    "XML entity in sheet": FileCase(_entity_attack, "declares a DOCTYPE/ENTITY"),
    "external entity after a comment": FileCase(
        _entity_in_shared_part, "docProps/app.xml declares a DOCTYPE/ENTITY"
    ),
    "UTF-16 XML part": FileCase(_utf16_part, "is not UTF-8 XML"),
    "file too big": FileCase(_xlsx(rows_with()), "the limit is 0 MB", IntakeOptions(max_bytes=100)),
    "too many rows": FileCase(
        _csv([HEADER] + [rows_with(reference=f"R{i}")[1] for i in range(6)]),
        "data rows (limit 5)",
        IntakeOptions(max_rows=5),
    ),
    "missing required column": FileCase(
        _csv([["amount", "currency", "phone"], ["10", "GHS", "0241234567"]]),
        "missing required column: provider (headers found: 'amount', 'currency', 'phone')",
    ),
    "two columns mean destination": FileCase(
        _csv([["amount", "currency", "provider", "Phone", "MSISDN"], ["1", "GHS", "mtn", "0241234567", "x"]]),
        "columns 'Phone' and 'MSISDN' both mean destination",
    ),
    "same header twice": FileCase(
        _csv([HEADER + ["team", "Team"], GOOD + ["a", "b"]]), "the header 'Team' appears twice"
    ),
    "csv not UTF-8": FileCase(
        _bytes("payouts.csv", ",".join(HEADER).encode() + b"\r\nP1,10,GHS,mtn,0241234567,Kwam\xe9,\r\n"),
        "the csv is not UTF-8",
    ),
    "csv UTF-16": FileCase(_bytes("payouts.csv", ",".join(HEADER).encode("utf-16")), "the csv is UTF-16"),
    "missing file": FileCase(lambda d: d / "nowhere.xlsx", "file not found"),
}

ROW_CASES: dict[str, RowCase] = {
    "10,000-character cell": RowCase(
        _xlsx(rows_with(note=LONG)), 2, "note", "the cell has 10000 characters; at most 1000"
    ),
    "date-formatted amount": RowCase(_date_amount, 2, "amount", "the amount shows as a date (2024-03-15)"),
    "number formatted as date": RowCase(_date_number_amount, 2, "amount", "the cell is formatted as a date"),
    "amount with comma decimals": RowCase(
        _csv(rows_with(amount="1.234,50")), 2, "amount", "uses a comma for decimals"
    ),
    "amount comma only": RowCase(_csv(rows_with(amount="10,5")), 2, "amount", "uses a comma for decimals"),
    "amount scientific text": RowCase(
        _csv(rows_with(amount="1E+3")), 2, "amount", "is in scientific notation"
    ),
    "amount huge number cell": RowCase(
        _xlsx(rows_with(amount=1e20)), 2, "amount", "is in scientific notation"
    ),
    "negative amount": RowCase(_csv(rows_with(amount="-10.00")), 2, "amount", "the amount must be positive"),
    "amount in parentheses": RowCase(
        _csv(rows_with(amount="(10.00)")), 2, "amount", "the amount must be positive"
    ),
    "zero amount": RowCase(_xlsx(rows_with(amount=0)), 2, "amount", "must be greater than 0"),
    "three decimals": RowCase(
        _csv(rows_with(amount="10.005")), 2, "amount", "has more than 2 decimals; amounts are never rounded"
    ),
    "float artefact": RowCase(_float_artefact, 2, "amount", "'0.30000000000000004' has more than 2 decimals"),
    "dollar amount for GHS": RowCase(
        _csv(rows_with(amount="$10")), 2, "amount", "written in USD but the currency is GHS"
    ),
    "amount with words": RowCase(
        _csv(rows_with(amount="ten cedis")), 2, "amount", "unexpected text 'ten cedis'"
    ),
    "amount with spaces": RowCase(_csv(rows_with(amount="1 234.50")), 2, "amount", "is not an amount"),
    "blank amount": RowCase(_csv(rows_with(amount="")), 2, "amount", "the amount is required"),
    "phone in scientific notation": RowCase(
        _csv(rows_with(destination="2.33241E+11")),
        2,
        "destination",
        "Excel turned the phone number into scientific notation (2.33241E+11)",
    ),
    "dropped leading zero (numeric cell)": RowCase(
        _xlsx(rows_with(destination=241234567)),
        2,
        "destination",
        "Excel dropped the leading zero of '241234567'",
    ),
    "phone too short": RowCase(
        _csv(rows_with(destination="024123")), 2, "destination", "wrong number of digits"
    ),
    "phone with letters": RowCase(
        _csv(rows_with(destination="024-CALL-ME")), 2, "destination", "is not a phone number"
    ),
    "unknown provider": RowCase(
        _csv(rows_with(provider="vodafone")), 2, "provider", "unknown provider 'vodafone'"
    ),
    "blank provider": RowCase(_csv(rows_with(provider="")), 2, "provider", "the provider is required"),
    "unsupported currency": RowCase(
        _csv(rows_with(currency="USD")), 2, "currency", "currency USD is not supported"
    ),
    "bad currency": RowCase(_csv(rows_with(currency="cedi")), 2, "currency", "is not a currency code"),
    "note too long": RowCase(
        _csv(rows_with(note="n" * 51)), 2, "note", "the note has 51 characters; at most 50"
    ),
    "note with line break": RowCase(
        _xlsx(rows_with(note="line\nbreak")), 2, "note", "contains control characters"
    ),
    "bad reference": RowCase(
        _csv(rows_with(reference="pay 001!")), 2, "reference", "the reference must be 1 to 64"
    ),
    "reference too long": RowCase(
        _csv(rows_with(reference="R" * 65)), 2, "reference", "the reference must be 1 to 64"
    ),
    "provider pays to another type": RowCase(
        _csv([HEADER + ["type"], GOOD[:3] + ["gcb"] + GOOD[4:] + ["msisdn"]]),
        2,
        "type",
        "provider gcb pays to account, not msisdn",
    ),
    "unknown destination type": RowCase(
        _csv([HEADER + ["type"], GOOD + ["iban"]]), 2, "type", "unknown destination type 'iban'"
    ),
}


@pytest.mark.parametrize("case", FILE_CASES.values(), ids=FILE_CASES.keys())
def test_whole_file_refusals(case: FileCase, tmp_path: Path) -> None:
    path = case.build(tmp_path)
    with pytest.raises(IntakeError) as caught:
        read_payout_sheet(str(path), case.options)
    assert isinstance(caught.value, IntakeError)  # column problems are ColumnsUnmatched, with the headers
    assert case.message in str(caught.value)
    assert "Traceback" not in str(caught.value)


@pytest.mark.parametrize("case", ROW_CASES.values(), ids=ROW_CASES.keys())
def test_row_errors(case: RowCase, tmp_path: Path) -> None:
    result = read_payout_sheet(str(case.build(tmp_path)), case.options)
    assert [(e.row, e.column) for e in result.errors] == [(case.row, case.column)], result.errors
    assert case.message in result.errors[0].message
    assert result.rows == [] and result.rows_invalid == 1 and result.rows_total == 1


def test_corpus_size() -> None:
    assert len(FILE_CASES) + len(ROW_CASES) >= 25


def test_long_cell_value_is_truncated_in_the_issue(tmp_path: Path) -> None:
    result = read_payout_sheet(str(write_xlsx(tmp_path / "s.xlsx", rows_with(payee_name=LONG))))
    (issue,) = result.errors
    assert issue.column == "payee name"
    assert len(issue.value) < 100 and issue.value.endswith("…(10000 characters)")
    assert result.table[0]["payee name"] == LONG  # the report keeps the cell as written


def test_errors_are_located_on_the_right_rows_with_blank_rows_between(tmp_path: Path) -> None:
    rows = [HEADER, rows_with()[1], [], [None] * 7, rows_with(reference="P2", amount="abc")[1]]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "s.xlsx", rows)))
    assert [(e.row, e.column) for e in result.errors] == [(5, "amount")]
    assert result.rows_total == 2 and [r.row for r in result.rows] == [2]


def test_duplicate_references_are_errors_on_each_row_ignoring_case(tmp_path: Path) -> None:
    rows = [
        HEADER,
        rows_with(reference="A-1")[1],
        rows_with(reference="B-2", destination="0201234567")[1],
        rows_with(reference="a-1", destination="0551234567")[1],
    ]
    result = read_payout_sheet(str(write_csv(tmp_path / "s.csv", rows)))
    assert [(e.row, e.column) for e in result.errors] == [(2, "reference"), (4, "reference")]
    assert "also used on row 4" in result.errors[0].message
    assert "also used on row 2" in result.errors[1].message
    assert [r.reference for r in result.rows] == ["B-2"] and result.rows_invalid == 2


def test_duplicate_payee_is_a_warning_not_an_error(tmp_path: Path) -> None:
    rows = [
        HEADER,
        rows_with(reference="A1")[1],
        rows_with(reference="A2", destination="+233 24 123 4567")[1],
    ]
    result = read_payout_sheet(str(write_csv(tmp_path / "s.csv", rows)))
    assert result.errors == [] and len(result.rows) == 2
    assert [(w.row, w.column) for w in result.warnings] == [(2, "destination"), (3, "destination")]
    assert "same destination and amount as row 3" in result.warnings[0].message


def test_several_errors_in_one_row_are_all_reported_in_column_order(tmp_path: Path) -> None:
    rows = [HEADER, ["bad ref!", "-1", "GHS", "nope", "12", "", "n" * 60]]
    result = read_payout_sheet(str(write_csv(tmp_path / "s.csv", rows)))
    assert [e.column for e in result.errors] == ["reference", "amount", "provider", "destination", "note"]
    assert result.rows_invalid == 1


def test_hidden_first_sheet_is_skipped(tmp_path: Path) -> None:
    def hidden_first(book):
        book.active.title = "lookup"
        book.active.append(["junk", "not", "payouts"])
        book.active.sheet_state = "hidden"

    path = write_xlsx(tmp_path / "s.xlsx", rows_with(), sheet="March", before=hidden_first)
    result = read_payout_sheet(str(path))
    assert result.sheet == "March" and len(result.rows) == 1


def test_formula_with_cached_value_is_read_as_its_value(tmp_path: Path) -> None:
    path = _formula_sheet(tmp_path)
    with_sheet_xml(path, lambda xml: xml.replace(b"<f>100+50</f><v />", b"<f>100+50</f><v>150</v>"))
    result = read_payout_sheet(str(path))
    assert result.errors == [] and str(result.rows[0].amount) == "150.00"
