"""A payroll export as an HR system writes it (issue 46): its own headers, no currency column, the currency in
the amount's header, numbers as people type them ("+233 24 123 4567"), a few payees the provider refuses and
names that do not match the account holder."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from payops.sandbox.engine.party_lookups import holder_name

from benchmarks.sheets import TEST_ENDINGS, write_sheet

HR_HEADERS = [
    "Employee ID",
    "Full Name",
    "Phone Number",
    "Net Pay (GHS)",
    "Bank/Network",
    "Payment Reference",
]
NETWORKS = ("MTN", "Telecel", "AirtelTigo")


def hr_rows(
    n: int,
    *,
    prefix: str,
    failing: tuple[str, ...] = (),
    mismatched: tuple[int, ...] = (),
    amounts_as_text: bool = False,
) -> list[list]:
    """``n`` rows; the first ``len(failing)`` payees' numbers end in ``failing`` (the emulator's test endings:
    ``0001`` no funds at the provider, ``0002`` no such account); rows at ``mismatched`` (0-based) carry a
    name that is not the account holder's. Amounts have cents: numbers, or text with thousands separators
    ("1,537.01") as some exports write them. Employee IDs and networks repeat nothing a run relies on."""
    rows = []
    for i in range(n):
        digits = f"24{i % 1000:03d}{5000 + i % 5000:04d}"  # distinct, none a test ending by chance
        assert digits[-4:] not in TEST_ENDINGS
        if i < len(failing):
            digits = digits[:-4] + failing[i]
        msisdn = "233" + digits
        name = "Kwesi Appiah-Danquah" if i in mismatched else holder_name(msisdn)
        amount = Decimal(1500) + Decimal(i * 37 % 900) + Decimal(i % 100) / 100
        phone = f"+233 {digits[:2]} {digits[2:5]} {digits[5:]}"
        cell = f"{amount:,.2f}" if amounts_as_text else amount
        rows.append([f"EMP{i:05d}", name, phone, cell, NETWORKS[i % 3], f"{prefix}-{i:04d}"])
    return rows


def hr_total(rows: list[list]) -> Decimal:
    """The sum of the rows' net pay."""
    return sum((Decimal(str(r[3]).replace(",", "")) for r in rows), Decimal(0))


def hr_export(path: Path, rows: list[list], amount_header: str = "Net Pay (GHS)") -> Path:
    """``rows`` (:func:`hr_rows`) as an .xlsx HR export whose amount header is ``amount_header``."""
    headers = [amount_header if h == "Net Pay (GHS)" else h for h in HR_HEADERS]
    return write_sheet(path, rows, headers=headers)
