"""Generate examples/payouts-demo.xlsx: 260 payroll rows, a few of them failing on purpose.

Destination values ending 0001/0002 fail at the provider and 0003 passes through in_review (the emulator's
documented test values), so the demo shows every kind of result. Payee names are the ones the emulator's
party lookups return for each number, except two rows with a wrong name, so the pre-flight name check has
something to flag. Run: python examples/make_demo_sheet.py
"""

from __future__ import annotations

import random
import sys
from decimal import Decimal
from pathlib import Path

from openpyxl import Workbook

FIRST = ["Ama", "Kofi", "Akosua", "Yaw", "Abena", "Kwame", "Efua", "Kojo", "Adwoa", "Kwabena", "Esi", "Kwesi"]
LAST = ["Mensah", "Owusu", "Boateng", "Asante", "Osei", "Addo", "Appiah", "Agyeman", "Ofori", "Darko"]
PREFIX = {"mtn": "23324", "telecel": "23320", "airteltigo": "23327"}
GRADES = [Decimal(x) for x in ("850.00", "1200.00", "1450.50", "1800.00", "2250.75", "3100.00", "4200.00")]
SPECIAL = {17: "0001", 64: "0002", 121: "0003", 188: "0001", 230: "0002"}


WRONG_NAME = {40: "Kofi Annan", 150: "Yaa Asantewaa"}


def rows(n: int, seed: int = 7) -> list[list[str]]:
    from payops.sandbox.engine.party_lookups import holder_name

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        name = f"{rnd.choice(FIRST)} {rnd.choice(LAST)}"
        if i % 25 == 24:
            provider, dtype = "calbank", "account"
            dest = f"{rnd.randrange(10**12, 10**13)}"
        else:
            provider, dtype = rnd.choice(list(PREFIX)), "msisdn"
            dest = PREFIX[provider] + f"{rnd.randrange(10**6, 10**7)}"
        if i in SPECIAL:
            dest = dest[:-4] + SPECIAL[i]
        else:
            while dest[-4:] in {
                "0001",
                "0002",
                "0003",
                "0004",
                "0005",
                "0006",
                "0007",
                "0404",
                "0502",
                "0504",
            }:
                dest = dest[:-1] + str((int(dest[-1]) + 1) % 10)
        if dtype == "msisdn":
            name = WRONG_NAME.get(i, holder_name(dest))
        amount = rnd.choice(GRADES)
        out.append(
            [f"EMP-{1000 + i}", name, str(amount), "GHS", provider, dtype, dest, f"Salary Nov {i + 1}"]
        )
    return out


def write(path: Path, n: int = 260) -> Path:
    wb = Workbook()
    ws = wb.active
    ws.title = "payouts"
    ws.append(
        [
            "employee id",
            "payee name",
            "amount",
            "currency",
            "provider",
            "destination type",
            "destination",
            "note",
        ]
    )
    for r in rows(n):
        ws.append(r)
    for cell in ws["G"]:
        cell.number_format = "@"
    wb.save(path)
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("payouts-demo.xlsx")
    print(write(target))
