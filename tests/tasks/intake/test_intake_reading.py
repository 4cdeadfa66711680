"""Reading good sheets: aliases, csv dialects, fsspec URLs, normalisation, the result's fields."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path

import fsspec
import pytest
from intake_corpus import GOOD, HEADER, rows_with, write_csv, write_xlsx
from payops.tasks.intake import IntakeOptions, read_payout_sheet
from payops.tasks.intake.columns import ALIASES, field_for_header
from payops.tasks.rows.payout_row import PayoutRow


def test_aliases_and_extras(tmp_path: Path) -> None:
    header = [
        "Ref",
        "Amount (GHS)",
        "CURRENCY",
        "Network",
        "Phone Number",
        "Recipient_Name",
        "Narration",
        "Dept",
    ]
    row = ["X-1", "1,500.00", "ghs", "Telecel", "024 123 4567", "  Ama   Mensah ", "bonus", "finance"]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "a.xlsx", [header, row])))
    assert result.errors == []
    assert result.columns == header
    (payout,) = result.rows
    assert payout == PayoutRow(
        row=2,
        reference="X-1",
        amount=Decimal("1500.00"),
        currency="GHS",
        provider="telecel",
        destination_type="msisdn",
        destination="233241234567",
        payee_name="Ama Mensah",
        note="bonus",
        extra={"Dept": "finance"},
    )


@pytest.mark.parametrize(
    "field_name",
    ["reference", "amount", "currency", "provider", "destination_type", "destination", "payee_name", "note"],
)
def test_every_documented_alias_matches(field_name: str) -> None:
    for alias in ALIASES[field_name]:
        for variant in (
            alias,
            alias.upper(),
            alias.replace(" ", "_"),
            alias.replace(" ", "-"),
            f" {alias.title()} ",
        ):
            assert field_for_header(variant) == field_name, variant


def test_csv_with_bom_and_semicolons(tmp_path: Path) -> None:
    rows = [
        HEADER,
        GOOD,
        rows_with(reference="PAY-002", destination="+233 20 123 4567", amount="1,000.50")[1],
    ]
    path = write_csv(tmp_path / "p.csv", rows, delimiter=";", bom=True)
    result = read_payout_sheet(str(path))
    assert result.errors == [] and result.columns == HEADER
    assert [(r.row, r.destination, str(r.amount)) for r in result.rows] == [
        (2, "233241234567", "150.00"),
        (3, "233201234567", "1000.50"),
    ]


def test_csv_line_numbers_count_multiline_cells(tmp_path: Path) -> None:
    rows = [HEADER, rows_with(note="two\nlines")[1], rows_with(reference="P2", amount="x")[1]]
    result = read_payout_sheet(str(write_csv(tmp_path / "p.csv", rows)))
    assert [(e.row, e.column) for e in result.errors] == [(2, "note"), (4, "amount")]


def test_fsspec_memory_url(tmp_path: Path) -> None:
    data = write_xlsx(tmp_path / "m.xlsx", rows_with()).read_bytes()
    with fsspec.open("memory://intake-test/payouts.xlsx", "wb") as handle:
        handle.write(data)
    result = read_payout_sheet("memory://intake-test/payouts.xlsx")
    assert result.source == "memory://intake-test/payouts.xlsx"
    assert result.content_sha256 == hashlib.sha256(data).hexdigest()
    assert len(result.rows) == 1 and result.sheet == "payouts"


def test_file_url(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", rows_with())
    assert len(read_payout_sheet(path.as_uri()).rows) == 1


def test_numeric_phone_cells_and_whitespace(tmp_path: Path) -> None:
    rows = [
        HEADER,
        rows_with(destination=233241234567)[1],
        rows_with(reference="P2", destination="\xa0 0201234567 ")[1],
    ]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "n.xlsx", rows)))
    assert [r.destination for r in result.rows] == ["233241234567", "233201234567"]
    assert result.table[0]["destination"] == "233241234567"


def test_numeric_amount_cells(tmp_path: Path) -> None:
    rows = [HEADER, rows_with(amount=1234.5)[1], rows_with(reference="P2", amount=7)[1]]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "n.xlsx", rows)))
    assert [str(r.amount) for r in result.rows] == ["1234.50", "7.00"]


def test_destination_type_follows_provider_and_accepts_words(tmp_path: Path) -> None:
    header = ["amount", "currency", "provider", "destination type", "account number"]
    rows = [
        header,
        ["10", "GHS", "gcb", "", "1234-5678-90123"],
        ["10", "GHS", "mtn", "Mobile Money", "0241234567"],
        ["10", "GHS", "card", "card", "card_tok-123"],
        ["10", "GHS", "ecobank", "bank account", "00012345678"],
    ]
    result = read_payout_sheet(str(write_csv(tmp_path / "t.csv", rows)))
    assert result.errors == []
    assert [(r.destination_type, r.destination) for r in result.rows] == [
        ("account", "1234567890123"),
        ("msisdn", "233241234567"),
        ("card", "card_tok-123"),
        ("account", "00012345678"),
    ]


def test_numeric_account_number_warns(tmp_path: Path) -> None:
    rows = [["amount", "currency", "provider", "destination"], [10, "GHS", "gcb", 1234567890123]]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "a.xlsx", rows)))
    assert result.errors == [] and result.rows[0].destination == "1234567890123"
    assert "drops leading zeros" in result.warnings[0].message


def test_default_currency_option(tmp_path: Path) -> None:
    rows = [["amount", "provider", "phone"], ["10", "mtn", "0241234567"]]
    path = write_csv(tmp_path / "c.csv", rows)
    result = read_payout_sheet(str(path), IntakeOptions(default_currency="GHS"))
    assert result.rows[0].currency == "GHS"
    blank_cell = write_csv(tmp_path / "b.csv", rows_with(currency=""))
    assert read_payout_sheet(str(blank_cell), IntakeOptions(default_currency="GHS")).rows[0].currency == "GHS"


def test_custom_providers_and_country_code(tmp_path: Path) -> None:
    options = IntakeOptions(
        known_providers=frozenset({"MTN", "Glo"}), default_country_code="234", known_currencies=frozenset()
    )
    rows = [HEADER, ["P1", "10", "NGN", "glo", "0803 123 4567", "", ""]]
    result = read_payout_sheet(str(write_csv(tmp_path / "o.csv", rows)), options)
    assert result.errors == [] and result.rows[0].destination == "2348031234567"


def test_result_table_and_counts(tmp_path: Path) -> None:
    rows = [
        HEADER,
        GOOD + ["stray"],
        [],
        rows_with(reference="P2", amount="-1")[1],
        [None] * 7 + ["only this"],
    ]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "r.xlsx", rows)))
    assert result.columns == HEADER + ["column H"]
    assert result.rows_total == 3 and result.rows_invalid == 2 and len(result.rows) == 1
    assert [t["__row__"] for t in result.table] == ["2", "4", "5"]
    assert result.table[1]["amount"] == "-1"
    assert result.rows[0].extra == {"column H": "stray"}
    assert {(e.row, e.column) for e in result.errors if e.row == 5} >= {(5, "amount"), (5, "provider")}


def test_constructed_rows_pass_pydantic_validation(tmp_path: Path) -> None:
    rows = [HEADER] + [
        rows_with(reference=f"R{i}", amount=f"{i + 1}.5", destination=f"02{i:08d}")[1] for i in range(50)
    ]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "v.xlsx", rows)))
    assert len(result.rows) == 50
    for row in result.rows:
        assert PayoutRow.model_validate(row.model_dump()) == row


def test_sheet_named_payouts_wins_over_first(tmp_path: Path) -> None:
    def other_first(book):
        book.active.title = "Summary"
        book.active.append(["total", 5])

    path = write_xlsx(tmp_path / "s.xlsx", rows_with(), sheet="PAYOUTS", before=other_first)
    assert read_payout_sheet(str(path)).sheet == "PAYOUTS"


def test_header_below_title_rows_and_offset_columns(tmp_path: Path) -> None:
    rows = [[], [None, *HEADER], [None, *GOOD]]
    result = read_payout_sheet(str(write_xlsx(tmp_path / "o.xlsx", rows)))
    assert result.errors == [] and result.rows[0].row == 3


def test_every_column_refuses_an_oversized_cell_once(tmp_path: Path) -> None:
    """Each field check refuses a cell over max_cell_chars before its own checks; extra columns too."""
    long = "9" * 1200
    rows = [HEADER + ["team"], GOOD + ["ops"]]
    for k, column in enumerate(
        ("reference", "amount", "currency", "provider", "destination", "payee name", "team")
    ):
        row = [f"PAY-{k}", *GOOD[1:4], f"024123450{k}", *GOOD[5:], "ops"]
        row[(HEADER + ["team"]).index(column)] = long
        rows.append(row)
    result = read_payout_sheet(write_csv(tmp_path / "long.csv", rows))
    assert [r.row for r in result.rows] == [2]
    assert [(e.row, e.column, e.message) for e in result.errors] == [
        (3 + k, column, "the cell has 1200 characters; at most 1000 are allowed")
        for k, column in enumerate(
            ("reference", "amount", "currency", "provider", "destination", "payee name", "team")
        )
    ]
    assert result.errors[0].value.endswith("…(1200 characters)")


def test_only_ascii_digits_reach_the_api(tmp_path: Path) -> None:
    """Digits of other scripts pass ``\\d`` and ``str.isdigit``; a destination must be ASCII to be sent."""
    rows = [HEADER, rows_with(destination="0" + "\u0662\u0664\u0661\u0662\u0663\u0664\u0665\u0666\u0667")[1]]
    for path in (write_csv(tmp_path / "d.csv", rows), write_xlsx(tmp_path / "d.xlsx", rows)):
        result = read_payout_sheet(path)
        assert result.rows == []
        assert [(e.row, e.column) for e in result.errors] == [(2, "destination")]
