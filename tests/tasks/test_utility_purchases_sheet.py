"""Pure parts of the utility pipeline: sheet validation, references and keys, chunks."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import Workbook
from payops.tasks.intake import IntakeError, read_raw_sheet
from payops.tasks.utility_purchases import ProductInfo, chunks, purchase_orders, validate_utility_sheet
from payops.tasks.wire.references import REFERENCE_PATTERN

D = Decimal
PRODUCTS = [
    ProductInfo(
        "mtn-airtime", "airtime", "mtn", "MTN airtime", "flexi", "GHS", "verified", None, D("1"), D("1000")
    ),
    ProductInfo("mtn-data-1gb", "data", "mtn", "1GB", "fixed", "GHS", "verified", D("10.00")),
    ProductInfo("mtn-data-5gb", "data", "mtn", "5GB", "fixed", "GHS", "verified", D("45.00")),
    ProductInfo("at-daily", "data", "airteltigo", "Daily", "fixed", "GHS", "unverified", D("3.00")),
    ProductInfo("ngn-airtime", "airtime", "glo", "Glo", "flexi", "NGN", "verified", None, D("1"), D("9")),
]


def sheet(tmp_path: Path, header: list[str], rows: list[list[str]], name: str = "s.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def validate(path: Path):
    return validate_utility_sheet(read_raw_sheet(path), str(path), PRODUCTS)


def test_valid_rows_resolve_products_and_amounts(tmp_path: Path) -> None:
    path = sheet(
        tmp_path,
        ["Phone Number", "Network", "Category", "Amount", "Funding", "Payer Provider", "Payer MSISDN"],
        [
            ["024 555 0100", "MTN", "airtime", "GH₵ 7.5", "", "", ""],
            ["0245550101", "mtn", "data", "45", "collection", "MTN", "+233245550999"],
            ["0245550102", "airteltigo", "data", "", "", "", ""],
        ],
    )
    s = validate(path)
    assert s.errors == [] and [r.product_id for r in s.rows] == ["mtn-airtime", "mtn-data-5gb", "at-daily"]
    assert [r.amount for r in s.rows] == [D("7.50"), D("45.00"), D("3.00")]
    assert s.rows[0].msisdn == "233245550100" and s.rows[1].payer_msisdn == "233245550999"
    assert s.rows[1].funding == "collection" and s.rows[1].payer_provider == "mtn"
    assert [(w.row, w.column) for w in s.warnings] == [(4, "Network")]  # unverified delivery, located


def test_every_problem_is_located_by_row_and_column(tmp_path: Path) -> None:
    path = sheet(
        tmp_path,
        ["msisdn", "product", "amount", "currency"],
        [
            ["2.33245E+11", "mtn-airtime", "5", ""],
            ["0245550201", "mtn-data-1gb", "9.99", ""],
            ["0245550202", "mtn-airtime", "0.50", ""],
            ["0245550203", "mtn-airtime", "5.555", ""],
            ["0245550204", "mtn-airtime", "5", "USD"],
            ["0245550205", "ngn-airtime", "5", ""],
            ["0245550206", "mtn-airtime", "", ""],
        ],
    )
    s = validate(path)
    assert s.rows == [] and s.rows_invalid == 7
    got = {(e.row, e.column): e.message for e in s.errors}
    assert "scientific" in got[(2, "msisdn")]
    assert "10.00" in got[(3, "amount")] and "1.00 to 1000.00" in got[(4, "amount")]
    assert "more than 2 decimals" in got[(5, "amount")] and "GHS" in got[(6, "currency")]
    assert "NGN" in got[(7, "product")] and "required" in got[(8, "amount")]


def test_ambiguous_network_category_and_missing_columns(tmp_path: Path) -> None:
    s = validate(sheet(tmp_path, ["msisdn", "network", "category"], [["0245550300", "mtn", "data"]]))
    assert "several products" in s.errors[0].message and "mtn-data-1gb" in s.errors[0].message
    with pytest.raises(IntakeError, match="'msisdn' column"):
        validate(sheet(tmp_path, ["number2", "product"], [["1", "mtn-airtime"]], "m.csv"))
    with pytest.raises(IntakeError, match="'product' column"):
        validate(sheet(tmp_path, ["msisdn", "network"], [["0245550300", "mtn"]], "n.csv"))
    with pytest.raises(IntakeError, match=r"\.xls\) files are not supported; save the sheet as \.xlsx"):
        read_raw_sheet(tmp_path / "x.xls")
    with pytest.raises(IntakeError, match="unsupported file type '.ods'"):
        read_raw_sheet(tmp_path / "x.ods")


def test_xlsx_is_read_with_the_intake_safety(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.append(["msisdn", "product", "amount"])
    ws.append(["0245550400", "mtn-airtime", 12.5])
    ws.append(["0245550401", "mtn-airtime", "=1+1"])  # a formula without a saved value is refused
    wb.save(tmp_path / "f.xlsx")
    with pytest.raises(IntakeError, match="formulas without a saved value"):
        read_raw_sheet(tmp_path / "f.xlsx")
    ws.delete_rows(3)
    wb.save(tmp_path / "ok.xlsx")
    s = validate(tmp_path / "ok.xlsx")
    assert s.errors == [] and s.rows[0].amount == D("12.50")


def test_references_and_keys_are_stable_and_change_with_the_body(tmp_path: Path) -> None:
    s = validate(sheet(tmp_path, ["msisdn", "product", "amount"], [["0245550500", "mtn-airtime", "5"]] * 3))
    label = "Payroll top-ups / March 2026 (final version for the whole team)"
    a, b = purchase_orders(s.rows, label), purchase_orders(s.rows, label)
    assert a == b and len({o.reference for o in a}) == 3 and len({o.idempotency_key for o in a}) == 3
    assert all(REFERENCE_PATTERN.match(o.reference) for o in a) and a[0].reference.endswith("-r2")
    assert a[0].body["beneficiary"] == {"msisdn": "233245550500"} and a[0].body["funding"] == {
        "type": "wallet"
    }
    edited = validate(
        sheet(tmp_path, ["msisdn", "product", "amount"], [["0245550500", "mtn-airtime", "6"]], "e.csv")
    )
    c = purchase_orders(edited.rows, label)[0]
    assert c.reference == a[0].reference and c.idempotency_key != a[0].idempotency_key
    assert purchase_orders(s.rows, "other")[0].reference != a[0].reference
    assert [len(p) for p in chunks(a * 40, 50)] == [50, 50, 20]
