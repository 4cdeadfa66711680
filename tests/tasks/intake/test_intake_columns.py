"""Columns: real payee-name headers, every ignored header listed, an explicit mapping in the fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest
from intake_corpus import write_csv, write_xlsx
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.intake.columns import (
    ColumnMapError,
    format_column_map,
    mapping_from_choices,
    parse_column_map,
)
from payops.tasks.payouts.run_summary import SheetCheckSummary
from payops.tasks.payouts.sheet_check import check_sheet

HEADER = ["Payment Reference", "Full Name", "Employee ID", "Amount (GHS)", "Currency", "Network", "Phone"]
ROW = ["PR-1", "Ama Mensah", "E-17", "10.00", "GHS", "mtn", "+233 24 123 4567"]


@pytest.mark.parametrize(
    "header", ["Full Name", "Employee Name", "Staff Name", "Beneficiary Name", "Account Holder Name"]
)
def test_payee_name_headers_of_real_exports_are_recognised(tmp_path: Path, header: str) -> None:
    rows = [["amount", "currency", "provider", "phone", header], [*ROW[3:], "Ama"]]
    sheet = write_csv(tmp_path / "s.csv", rows)
    result = read_payout_sheet(str(sheet))
    assert result.errors == [] and result.rows[0].payee_name == "Ama"
    assert result.mapped["payee_name"] == header and result.ignored == []


def test_every_unmapped_header_is_listed_and_the_mapping_says_which_header_is_which(tmp_path: Path) -> None:
    result = read_payout_sheet(str(write_xlsx(tmp_path / "s.xlsx", [HEADER + ["Dept"], ROW + ["ops"]])))
    assert result.ignored == ["Employee ID", "Dept"]
    assert result.mapped == {
        "reference": "Payment Reference",
        "amount": "Amount (GHS)",
        "currency": "Currency",
        "provider": "Network",
        "destination": "Phone",
        "payee_name": "Full Name",
    }


def test_payops_check_lists_the_ignored_columns_and_warns_without_a_name_column(tmp_path: Path) -> None:
    sheet = write_csv(tmp_path / "s.csv", [[*HEADER[:1], "Staff", *HEADER[2:]], ROW])
    summary = check_sheet(str(sheet), str(tmp_path / "r"))
    assert summary["outcome"] == "valid" and summary["ignored_columns"] == ["Staff", "Employee ID"]
    assert "no payee-name column" in summary["notes"][0]
    text = SheetCheckSummary.model_validate(summary).text()
    assert "ignored columns: Staff, Employee ID" in text and "note: no payee-name column" in text


def test_an_explicit_mapping_names_a_column_and_changes_the_fingerprint(tmp_path: Path) -> None:
    sheet = str(write_csv(tmp_path / "s.csv", [[*HEADER[:1], "Staff", *HEADER[2:]], ROW]))
    plain = check_sheet(sheet, str(tmp_path / "r"))
    staff = IntakeOptions(column_map={"staff": "payee_name"})
    mapped = check_sheet(sheet, str(tmp_path / "r"), options=staff)
    assert mapped["outcome"] == "valid" and mapped["ignored_columns"] == ["Employee ID"]
    assert "notes" not in mapped and mapped["column_map"] == "staff=payee_name"
    assert mapped["label"] != plain["label"]
    again = check_sheet(sheet, str(tmp_path / "r"), options=IntakeOptions(column_map={"Staff": "payee_name"}))
    assert again["label"] != plain["label"]


def test_an_explicit_mapping_resolves_two_headers_meaning_one_field(tmp_path: Path) -> None:
    header = ["amount", "currency", "provider", "Phone", "Mobile"]
    rows = [header, ["10.00", "GHS", "mtn", "0241234567", "0201234567"]]
    sheet = str(write_csv(tmp_path / "s.csv", rows))
    with pytest.raises(IntakeError, match="both mean destination; keep only one, or map a column"):
        read_payout_sheet(sheet)
    result = read_payout_sheet(sheet, IntakeOptions(column_map={"Mobile": "destination"}))
    assert result.rows[0].destination == "233201234567" and result.ignored == ["Phone"]


def test_a_mapping_naming_a_missing_header_refuses_the_sheet_naming_it(tmp_path: Path) -> None:
    sheet = str(write_csv(tmp_path / "s.csv", [HEADER, ROW]))
    with pytest.raises(IntakeError, match="names 'Staff Name', which is not a header of this sheet"):
        read_payout_sheet(sheet, IntakeOptions(column_map={"Staff Name": "payee_name"}))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Full Name", "is not Header=field"),
        ("Full Name=payee", "'payee' is not a field"),
        ("A=note; a=reference", "names the header 'a' twice"),
        ("A=note; B=note", "gives note two columns"),
    ],
)
def test_a_mapping_that_cannot_be_read_says_why(text: str, problem: str) -> None:
    with pytest.raises(ColumnMapError, match=problem):
        parse_column_map(text)


def test_a_mapping_reads_back_from_its_text() -> None:
    mapping = parse_column_map("Full Name = payee name;\nStaff Mobile=destination")
    assert mapping == {"Full Name": "payee_name", "Staff Mobile": "destination"}
    assert parse_column_map(format_column_map(mapping)) == mapping
    assert parse_column_map("") == {}


def test_none_ignores_a_header_an_alias_would_map(tmp_path: Path) -> None:
    rows = [
        ["amount", "currency", "provider", "phone", "Type"],
        ["10.00", "GHS", "mtn", "0241234567", "Permanent"],
    ]
    sheet = str(write_csv(tmp_path / "s.csv", rows))
    assert "unknown destination type" in read_payout_sheet(sheet).errors[0].message
    result = read_payout_sheet(sheet, IntakeOptions(column_map=parse_column_map("Type=none")))
    assert result.errors == [] and result.ignored == ["Type"] and result.rows[0].destination_type == "msisdn"


def test_a_mapping_forms_choices_are_written_only_where_the_headers_say_otherwise() -> None:
    columns = ["Net Pay", "Network", "Phone", "Mobile", "Type", "Staff"]
    chosen = {"amount": "Net Pay", "destination": "Mobile", "destination_type": "", "payee_name": "Staff"}
    mapping = mapping_from_choices(columns, chosen, {"Network": "provider", "Old": "payee_name"})
    assert mapping == {"Network": "provider", "Mobile": "destination", "Type": "none", "Staff": "payee_name"}
