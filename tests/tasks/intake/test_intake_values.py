"""Cell-level parsers: amounts, phone numbers, numeric cell text."""

from __future__ import annotations

from decimal import Decimal

import pytest
from payops.tasks.intake.amounts import CellError, parse_amount
from payops.tasks.intake.cells import cell_text
from payops.tasks.intake.phones import normalise_msisdn


@pytest.mark.parametrize(
    ("text", "amount", "mark"),
    [
        ("10", "10.00", None),
        ("1234.5", "1234.50", None),
        ("1,234.50", "1234.50", None),
        ("1,234,567.89", "1234567.89", None),
        ("10.500", "10.50", None),
        (".5", "0.50", None),
        ("GH₵ 10.00", "10.00", "GHS"),
        ("GHS 10", "10.00", "GHS"),
        ("10 GHS", "10.00", "GHS"),
        ("ghs10", "10.00", "GHS"),
        ("$10", "10.00", "USD"),
        ("+10", "10.00", None),
    ],
)
def test_amounts_accepted(text: str, amount: str, mark: str | None) -> None:
    value, found = parse_amount(text)
    assert isinstance(value, Decimal) and str(value) == amount and found == mark


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "required"),
        ("0", "greater than 0"),
        ("0.00", "greater than 0"),
        ("-5", "positive"),
        ("−5", "positive"),
        ("5-", "positive"),
        ("1.234,50", "comma for decimals"),
        ("1.234.567", "comma for decimals"),
        ("1.234", "more than 2 decimals"),
        ("1e3", "scientific notation"),
        ("2024-03-15", "shows as a date"),
        ("2024-03-15 00:00:00", "shows as a date"),
        ("12:30:00", "shows as a date"),
        ("12,34", "comma for decimals"),
        ("1,23.4", "not an amount"),
        ("GHS 10 USD", "not an amount"),
        ("10 cedis", "unexpected text"),
        ("1" * 16, "too large"),
    ],
)
def test_amounts_refused(text: str, message: str) -> None:
    with pytest.raises(CellError, match=message):
        parse_amount(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("024 123 4567", "233241234567"),
        ("+233 24 123 4567", "233241234567"),
        ("0241234567", "233241234567"),
        ("233241234567", "233241234567"),
        ("00233241234567", "233241234567"),
        ("024-123-4567", "233241234567"),
        ("(024) 123.4567", "233241234567"),
        ("233241234567.0", "233241234567"),
        ("024\xa0123\xa04567", "233241234567"),
        ("+44 7911 123456", "447911123456"),
    ],
)
def test_phone_normalisation(text: str, expected: str) -> None:
    assert normalise_msisdn(text, "233") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("241234567", "Excel dropped the leading zero"),
        ("2.33241E+11", "scientific notation"),
        ("2,33241E+11", "scientific notation"),
        ("+233 24 123 456", "wrong number of digits for country code"),
        ("02412345678", "wrong number of digits"),
        ("447911123456", "not a valid phone number"),
        ("abc", "not a phone number"),
        ("", "required"),
    ],
)
def test_phone_refused(text: str, message: str) -> None:
    with pytest.raises(CellError, match=message):
        normalise_msisdn(text, "233")


def test_other_country_code() -> None:
    assert normalise_msisdn("0803 123 4567", "234") == "2348031234567"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (233241234567.0, "233241234567"),
        (1.0, "1"),
        (1234.5, "1234.5"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1234567890123456.0, "1.23456789012346e+15"),
        (1e20, "1e+20"),
        (True, "TRUE"),
        ("  \xa0 x\u200b ", "x"),
    ],
)
def test_cell_text(value: object, text: str) -> None:
    assert cell_text(value) == text


def _column(values: list[object]) -> tuple[list[str], list[int]]:
    from payops.tasks.intake.parsing import _column_texts

    texts, numeric, joined = _column_texts(values)
    assert joined == ("\n".join(texts) if all("\n" not in t for t in texts) else None)
    return texts, numeric


def test_column_fast_paths_give_the_same_text_as_cell_text() -> None:
    numbers = [1.0, 1234.5, 0.1 + 0.2, 1e-05, 233241234567.0, 12.25, 0.0]
    assert _column(numbers) == ([cell_text(v) for v in numbers], list(range(len(numbers))))
    for texts in (
        [" a ", "\xa0b\u200b", "", "c"],
        ["\ufeff x\u2060 ", "\u3000y\u2003", "\u200b"],
        ["plain", "  spaced  ", "\t tab"],
        ["in\nside", " b "],
    ):
        assert _column(texts) == ([cell_text(v) for v in texts], [])  # type: ignore[arg-type]
    mixed = ["x", 2.0, True, 1e16]
    assert _column(mixed) == (["x", "2", "TRUE", "1e+16"], [1, 3])


def test_float_column_texts_equal_cell_text() -> None:
    """The whole-column conversion of numeric cells gives exactly what cell_text gives cell by cell."""
    from payops.tasks.intake.parsing import _float_texts

    values = [0.0, -0.0, 1.0, 10.5, 1234.56, 0.1 + 0.2, 241234567.0, 1e-05, 123456789012345.0, -3.0, 5e-324]
    for column in (values, [v for v in values if v != 0]):
        texts, joined = _float_texts(column)
        assert texts == [cell_text(v) for v in column] and joined == "\n".join(texts)


@pytest.mark.parametrize(
    ("xml", "found"),
    [
        (b'<c r="A1"><f>SUM(B1:B2)</f><v>3</v></c>', True),
        (b'<c r="A1"><f t="shared" si="0"/></c>', True),
        (b'<x:c r="A1"><x:f>1+1</x:f></x:c>', True),
        (b'<c r="A1" t="inlineStr"><is><t>staff of the fund: f </t></is></c>', False),
        (b'<c r="A1"><v>1</v></c><sheetFormatPr defaultRowHeight="15"/>', False),
        (b'<c r="A1" t="inlineStr"><is><t>x:f y</t></is></c>', False),
    ],
)
def test_formula_detection(xml: bytes, found: bool) -> None:
    from payops.tasks.intake.safety import _has_formula

    assert _has_formula(xml) is found
