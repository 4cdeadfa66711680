"""The payout spreadsheet template: headers, dropdowns, text-formatted destination, instructions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.worksheet.datavalidation import DataValidation

from .columns import ALIASES
from .options import DEFAULT_PROVIDER_DESTINATION_TYPES

TEMPLATE_COLUMNS: list[tuple[str, str, int]] = [
    # header, number format, width
    ("reference", "@", 22),
    ("amount", "#,##0.00", 14),
    ("currency", "@", 10),
    ("provider", "@", 14),
    ("destination type", "@", 18),
    ("destination", "@", 20),
    ("payee name", "@", 26),
    ("note", "@", 40),
]
TEMPLATE_ROWS = 5_000
"""Rows covered by the dropdowns."""

_FIXED_TIME = dt.datetime(2025, 1, 1)

INSTRUCTIONS: list[tuple[str, str, str]] = [
    (
        "reference",
        "optional",
        "Your unique reference: 1-64 letters, digits, _ or -, starting with a letter or "
        "digit. Left blank, payops makes one. A reference used twice in the sheet is an error.",
    ),
    (
        "amount",
        "required",
        "Positive, at most 2 decimals, e.g. 1234.50 or 1,234.50. Never rounded. "
        "No comma decimals (1.234,50), no scientific notation, not a date.",
    ),
    ("currency", "required", "Three-letter code: GHS."),
    ("provider", "required", "One of: " + ", ".join(DEFAULT_PROVIDER_DESTINATION_TYPES) + "."),
    (
        "destination type",
        "optional",
        "msisdn (mobile money), account (bank) or card. Left blank, it follows the provider.",
    ),
    (
        "destination",
        "required",
        "Phone number (0241234567, 024 123 4567, +233 24 123 4567 → 233241234567), "
        "bank account number or card reference. The column is formatted as Text so Excel keeps leading "
        "zeros; "
        "a 9-digit number (lost 0) or scientific notation (2.33241E+11) is refused.",
    ),
    ("payee name", "optional", "Name of the recipient (at most 100 characters); used for the name check."),
    (
        "note",
        "optional",
        "At most 50 characters, no line breaks. Kept by the service, not sent to the provider.",
    ),
]


def write_template(path: str | Path) -> Path:
    """Write the payout template xlsx to ``path`` and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    book = Workbook()
    book.properties.creator = "payops"
    book.properties.created = _FIXED_TIME
    book.properties.modified = _FIXED_TIME
    sheet = book.active
    sheet.title = "payouts"
    header_font = Font(bold=True, color="FFFFFF")
    header_fill = PatternFill("solid", fgColor="305496")
    for col, (header, number_format, width) in enumerate(TEMPLATE_COLUMNS, start=1):
        cell = sheet.cell(row=1, column=col, value=header)
        cell.font = header_font
        cell.fill = header_fill
        letter = cell.column_letter
        sheet.column_dimensions[letter].width = width
        # a column style: Excel gives it to every cell typed in the column (Text keeps leading zeros)
        sheet.column_dimensions[letter].number_format = number_format
    sheet.freeze_panes = "A2"
    last = TEMPLATE_ROWS + 1
    dropdowns = {
        "C": ["GHS"],
        "D": list(DEFAULT_PROVIDER_DESTINATION_TYPES),
        "E": ["msisdn", "account", "card"],
    }
    for letter, values in dropdowns.items():
        rule = DataValidation(
            type="list",
            formula1='"' + ",".join(values) + '"',
            allow_blank=True,
            showErrorMessage=True,
            errorTitle="Not allowed",
            error="Pick a value from the list: " + ", ".join(values),
        )
        rule.add(f"{letter}2:{letter}{last}")
        sheet.add_data_validation(rule)
    amount_rule = DataValidation(
        type="decimal",
        operator="greaterThan",
        formula1="0",
        allow_blank=True,
        showErrorMessage=True,
        error="A positive amount with at most 2 decimals, e.g. 1234.50",
    )
    amount_rule.add(f"B2:B{last}")
    sheet.add_data_validation(amount_rule)

    info = book.create_sheet("instructions")
    info.column_dimensions["A"].width = 18
    info.column_dimensions["B"].width = 10
    info.column_dimensions["C"].width = 100
    info.column_dimensions["D"].width = 60
    info.append(["How to fill the payouts sheet"])
    info["A1"].font = Font(bold=True, size=14)
    info.append(["One payout per row on the 'payouts' sheet. Keep the header row. Blank rows are skipped."])
    info.append([])
    info.append(["column", "required", "rules", "other accepted headers"])
    for cell in info[4]:
        cell.font = Font(bold=True)
    field_names = {"destination type": "destination_type", "payee name": "payee_name"}
    for header, required, rules in INSTRUCTIONS:
        aliases = [a for a in ALIASES[field_names.get(header, header)] if a != header]
        info.append([header, required, rules, ", ".join(aliases)])
    for row in info.iter_rows(min_row=5):
        for cell in row:
            cell.alignment = Alignment(wrap_text=True, vertical="top")
    info.append([])
    info.append(["Example rows (type yours on the 'payouts' sheet):"])
    info.append([h for h, _, _ in TEMPLATE_COLUMNS])
    info.append(["MAR-0001", 150, "GHS", "mtn", "msisdn", "024 123 4567", "Ama Mensah", "March stipend"])
    info.append(["MAR-0002", 2500.5, "GHS", "gcb", "account", "1234567890123", "Kofi Boateng", ""])
    book.save(path)
    return path
