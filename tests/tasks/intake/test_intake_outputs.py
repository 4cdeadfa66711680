"""The template, the validation report and the public surface."""

from __future__ import annotations

import io
from pathlib import Path

import fsspec
import payops.tasks.intake as intake
import pytest
from intake_corpus import HEADER, rows_with, write_csv
from openpyxl import load_workbook
from payops.tasks.intake import IntakeError, read_payout_sheet, write_template, write_validation_report
from payops.tasks.rows.payout_row import RowIssue

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "payouts-template.xlsx"


def test_public_surface() -> None:
    assert sorted(intake.__all__) == [
        "IntakeError",
        "IntakeOptions",
        "IntakeResult",
        "read_payout_sheet",
        "read_raw_sheet",
        "write_template",
        "write_validation_report",
    ]
    result_fields = set(intake.IntakeResult.__dataclass_fields__)
    assert result_fields == {
        "source",
        "sheet",
        "content_sha256",
        "rows",
        "errors",
        "warnings",
        "rows_total",
        "columns",
        "table",
        "mapped",
        "ignored",
        "currency",
        "currency_header",
    }
    assert list(RowIssue.__dataclass_fields__) == ["row", "column", "value", "message"]


def test_template_layout(tmp_path: Path) -> None:
    path = write_template(tmp_path / "t.xlsx")
    book = load_workbook(path)
    assert book.sheetnames == ["payouts", "instructions"]
    sheet = book["payouts"]
    headers = [c.value for c in sheet[1]]
    assert headers == [
        "reference",
        "amount",
        "currency",
        "provider",
        "destination type",
        "destination",
        "payee name",
        "note",
    ]
    assert sheet.column_dimensions["F"].number_format == "@"  # destination typed as text keeps its 0
    assert sheet.column_dimensions["A"].number_format == "@"
    assert sheet.column_dimensions["B"].number_format == "#,##0.00"
    lists = {str(dv.sqref): dv.formula1 for dv in sheet.data_validations.dataValidation if dv.type == "list"}
    assert lists["C2:C5001"] == '"GHS"'
    assert lists["D2:D5001"] == '"mtn,telecel,airteltigo,calbank,gcb,ecobank,card"'
    assert lists["E2:E5001"] == '"msisdn,account,card"'
    instructions = [row[0] for row in book["instructions"].iter_rows(values_only=True)]
    assert "destination" in instructions


def test_empty_template_has_no_data_rows_and_filled_template_reads(tmp_path: Path) -> None:
    path = write_template(tmp_path / "t.xlsx")
    with pytest.raises(IntakeError, match="no data rows"):
        read_payout_sheet(str(path))
    book = load_workbook(path)
    book["payouts"].append(["T-1", 25.5, "GHS", "mtn", "msisdn", "0241234567", "Ama", "test"])
    book.save(path)
    result = read_payout_sheet(str(path))
    assert result.errors == [] and result.rows[0].destination == "233241234567"


def test_example_template_is_generated_by_write_template(tmp_path: Path) -> None:
    assert EXAMPLE.exists(), "run write_template('examples/payouts-template.xlsx')"
    fresh = load_workbook(write_template(tmp_path / "t.xlsx"))
    committed = load_workbook(EXAMPLE)
    for name in fresh.sheetnames:
        assert [r for r in fresh[name].iter_rows(values_only=True)] == [
            r for r in committed[name].iter_rows(values_only=True)
        ]


def test_validation_report(tmp_path: Path) -> None:
    rows = [
        HEADER + ["comment"],
        rows_with()[1] + ['=HYPERLINK("http://evil")'],
        rows_with(reference="P2", amount="-5", provider="x")[1] + ["@SUM(1)"],
        rows_with(reference="P3", destination="0201234567")[1] + ["+fine"],
    ]
    result = read_payout_sheet(str(write_csv(tmp_path / "in.csv", rows)))
    path = write_validation_report(result, tmp_path / "out" / "report.xlsx")
    sheet = load_workbook(path).active
    values = [list(r) for r in sheet.iter_rows(values_only=True)]
    assert values[0] == ["row", *HEADER, "comment", "errors", "warnings"]
    assert values[1][0] == 2 and values[1][8] == '\'=HYPERLINK("http://evil")'
    assert values[2][2] == "-5" and values[2][8] == "'@SUM(1)"  # a plain number is no formula (issue 47)
    assert (
        values[2][9] == "amount: the amount must be positive; provider: unknown provider 'x'; use one of "
        "airteltigo, calbank, card, ecobank, gcb, mtn, telecel"
    )
    assert values[3][8] == "'+fine" and values[3][9] in (None, "")
    assert all(c.data_type != "f" for row in sheet.iter_rows() for c in row)
    assert sheet.cell(3, 10).fill.fgColor.rgb.endswith("FFC7CE")  # the error cell of row 3
    assert sheet.cell(2, 10).fill.fgColor.rgb == "00000000"
    assert sheet.freeze_panes == "A2"


def test_validation_report_to_an_fsspec_url(tmp_path: Path) -> None:
    rows = [HEADER, rows_with()[1], rows_with(reference="P2")[1]]  # same payee and amount twice: warnings
    result = read_payout_sheet(str(write_csv(tmp_path / "in.csv", rows)))
    assert [w.row for w in result.warnings] == [2, 3] and not result.errors
    url = write_validation_report(result, "memory://reports/run-validation.xlsx")
    with fsspec.open(url, "rb") as fh:
        sheet = load_workbook(io.BytesIO(fh.read())).active
    header = [c.value for c in sheet[1]]
    assert header[-2:] == ["errors", "warnings"]
    assert sheet.cell(2, len(header)).fill.fgColor.rgb.endswith("FFEB9C")  # a warning, no error: yellow


def test_report_column_names_do_not_collide(tmp_path: Path) -> None:
    rows = [HEADER + ["errors", "row"], rows_with()[1] + ["x", "y"]]
    result = read_payout_sheet(str(write_csv(tmp_path / "in.csv", rows)))
    sheet = load_workbook(write_validation_report(result, tmp_path / "r.xlsx")).active
    header = [c.value for c in sheet[1]]
    assert header == ["row (payops)", *HEADER, "errors", "row", "errors (payops)", "warnings"]
