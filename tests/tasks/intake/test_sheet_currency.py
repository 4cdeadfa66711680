"""The sheet's currency (issue 46): a real HR export without a currency column pays in the currency its amount
header names, or the one chosen for it; a header contradicting the choice is refused naming both."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from intake_corpus import write_csv, write_xlsx
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.intake.columns import ColumnsUnmatched, header_currency
from payops.tasks.payouts.run_summary import SheetCheckSummary
from payops.tasks.payouts.sheet_check import check_sheet

HR_HEADER = ["Employee ID", "Full Name", "Phone Number", "Net Pay (GHS)", "Bank/Network", "Payment Reference"]
HR_ROWS = [
    ["E-001", "Ama Mensah", "+233 24 123 4567", "2,450.00", "MTN", "PAY-2026-11-001"],
    ["E-002", "Kofi Boateng", "+233 20 765 4321", "1,980.55", "Telecel", "PAY-2026-11-002"],
]


def hr_sheet(path: Path, header: list[str] = HR_HEADER) -> Path:
    write = write_csv if path.suffix == ".csv" else write_xlsx
    return write(path, [header, *HR_ROWS])


@pytest.mark.parametrize("name", ["hr.xlsx", "hr.csv"])
def test_a_real_hr_export_is_read_with_no_mapping_and_no_currency_column(tmp_path: Path, name: str) -> None:
    result = read_payout_sheet(str(hr_sheet(tmp_path / name)))
    assert result.errors == [] and result.ignored == ["Employee ID"]
    read = [(r.currency, r.amount, r.payee_name, r.destination, r.provider, r.reference) for r in result.rows]
    assert read == [
        ("GHS", Decimal("2450.00"), "Ama Mensah", "233241234567", "mtn", "PAY-2026-11-001"),
        ("GHS", Decimal("1980.55"), "Kofi Boateng", "233207654321", "telecel", "PAY-2026-11-002"),
    ]
    assert (result.currency, result.currency_header) == ("GHS", "Net Pay (GHS)")


def test_the_streamed_reader_takes_the_currency_from_the_header_too(tmp_path: Path) -> None:
    sheet = str(hr_sheet(tmp_path / "hr.csv"))
    whole = check_sheet(sheet, str(tmp_path / "a"))
    streamed = check_sheet(sheet, str(tmp_path / "b"), stream_over_bytes=1)
    assert whole["outcome"] == streamed["outcome"] == "valid"
    for summary in (whole, streamed):
        assert (summary["currency"], summary["currency_header"]) == ("GHS", "Net Pay (GHS)")
    assert whole["label"] == streamed["label"] and whole["amount_total"] == "4430.55"


def test_payops_check_says_where_the_currency_came_from(tmp_path: Path) -> None:
    summary = check_sheet(str(hr_sheet(tmp_path / "hr.xlsx")), str(tmp_path / "r"))
    text = SheetCheckSummary.model_validate(summary).text()
    assert "currency GHS (from the header 'Net Pay (GHS)')" in text
    assert json.loads(json.dumps(summary.as_json()))["currency"] == "GHS"
    header = ["Full Name", "Phone", "Net Pay", "Network"]
    chosen = check_sheet(
        str(write_csv(tmp_path / "c.csv", [header, ["Ama", "0241234567", "10.00", "mtn"]])),
        str(tmp_path / "r"),
        options=IntakeOptions(default_currency="GHS"),
    )
    assert chosen["outcome"] == "valid" and "currency_header" not in chosen
    assert "currency GHS (chosen for the sheet)" in SheetCheckSummary.model_validate(chosen).text()


@pytest.mark.parametrize(
    ("header", "known", "code"),
    [
        ("Net Pay (GHS)", {"GHS"}, "GHS"),
        ("Amount GHS", {"GHS"}, "GHS"),
        ("Amount in GHS", {"GHS"}, "GHS"),
        ("amount (ghs)", {"GHS"}, "GHS"),
        ("Montant (XOF)", {"GHS", "XOF"}, "XOF"),
        ("Montant (XOF)", set(), "XOF"),
        ("Amount NGN", set(), "NGN"),
        ("Net Pay", {"GHS"}, None),
        ("NET PAY", set(), None),
        ("AMOUNT DUE", {"GHS"}, None),
        ("Amount due", set(), None),
        ("Amount (net)", {"GHS"}, None),
        ("Salary", set(), None),
    ],
)
def test_the_currency_an_amount_header_names(header: str, known: set[str], code: str | None) -> None:
    assert header_currency(header, frozenset(known)) == code


def test_a_header_currency_payops_does_not_pay_refuses_the_sheet_naming_it() -> None:
    with pytest.raises(IntakeError, match=r"'Amount \(USD\)' names the currency USD, which is not supported"):
        header_currency("Amount (USD)", frozenset({"GHS"}))


def test_a_header_currency_contradicting_the_chosen_one_is_refused_naming_both(tmp_path: Path) -> None:
    sheet = str(hr_sheet(tmp_path / "hr.xlsx"))
    options = IntakeOptions(default_currency="XOF", known_currencies=frozenset({"GHS", "XOF"}))
    with pytest.raises(IntakeError) as refused:
        read_payout_sheet(sheet, options)
    assert str(refused.value) == (
        "the amount header 'Net Pay (GHS)' says the currency is GHS, but XOF was chosen for the sheet; "
        "choose GHS, or rename the header"
    )
    same = read_payout_sheet(sheet, IntakeOptions(default_currency="GHS"))
    assert same.errors == [] and {r.currency for r in same.rows} == {"GHS"}


def test_a_currency_column_wins_over_the_header(tmp_path: Path) -> None:
    header = ["Amount (GHS)", "Currency", "Network", "Phone"]
    rows = [header, ["10.00", "XOF", "mtn", "0241234567"], ["12.00", "", "mtn", "0241234568"]]
    options = IntakeOptions(known_currencies=frozenset({"GHS", "XOF"}), default_currency="XOF")
    result = read_payout_sheet(str(write_csv(tmp_path / "c.csv", rows)), options)
    assert [r.currency for r in result.rows] == ["XOF", "XOF"]  # the blank cell takes the chosen one
    assert result.currency_header is None


def test_no_currency_anywhere_is_a_missing_column_the_person_can_choose(tmp_path: Path) -> None:
    header = ["Full Name", "Phone", "Net Pay", "Network"]
    sheet = str(write_csv(tmp_path / "c.csv", [header, ["Ama", "0241234567", "10.00", "mtn"]]))
    with pytest.raises(ColumnsUnmatched) as refused:
        read_payout_sheet(sheet)
    assert refused.value.fields == ("currency",)
    assert "missing required column: currency" in str(refused.value)
    assert "choose it for the sheet" in str(refused.value)


def test_a_chosen_currency_is_part_of_the_fingerprint(tmp_path: Path) -> None:
    sheet = str(hr_sheet(tmp_path / "hr.xlsx"))
    derived = check_sheet(sheet, str(tmp_path / "r"))
    chosen = check_sheet(sheet, str(tmp_path / "r"), options=IntakeOptions(default_currency="GHS"))
    assert derived["outcome"] == chosen["outcome"] == "valid"
    assert derived["label"] != chosen["label"]
    assert check_sheet(sheet, str(tmp_path / "r"))["label"] == derived["label"]
