"""The realistic payroll the payout benchmarks pay, generated row by row and written as xlsx or csv.

A payee name on every row (most match the emulator's directory of holder names, about 2% do not, 1% only
partly), a distinct mobile money number per row, amounts 20.00 to 150.00 with random cents. The rows are
generated lazily, so a csv of a million rows is written without holding the rows (the distinct numbers are
tracked in a 10 MB bytearray, one byte per possible number): the benchmark process stays small, and the flow
process it starts (forked from it) inherits nothing large.
"""

from __future__ import annotations

import csv
import random
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Literal

from payops.sandbox.engine.party_lookups import FIRST_NAMES, SURNAMES, holder_name

from benchmarks.sheets import HEADERS, TEST_ENDINGS, write_sheet

Format = Literal["csv", "xlsx"]
XLSX_MAX_ROWS = 1_048_575
"""An xlsx worksheet holds 1,048,576 rows, the header one of them."""
_NUMBERS = 10_000_000
"""Distinct numbers are drawn from ``23324`` followed by seven digits."""


def iter_payees(n: int, seed: int = 15) -> Iterator[tuple[str, str]]:
    """`n` distinct (number, sheet name): 97% the directory's name (some reordered), 2% someone else's,
    1% the first name only. The same sequence for the same `n` and `seed`."""
    if n > _NUMBERS * 0.9:
        raise ValueError(f"at most {int(_NUMBERS * 0.9):,} distinct payees")
    rng = random.Random(seed)
    seen = bytearray(_NUMBERS)
    numbers = array("l")  # 8 bytes a number (a list of ints: ~36 bytes)
    while len(numbers) < n:  # the numbers first, as one stream of the generator (names draw from it after)
        drawn = rng.randrange(_NUMBERS)
        if not seen[drawn] and f"{drawn:07d}"[-4:] not in TEST_ENDINGS:
            seen[drawn] = 1
            numbers.append(drawn)
    del seen
    for drawn in numbers:
        number = f"23324{drawn:07d}"
        holder = holder_name(number)
        roll = rng.random()
        if roll < 0.02:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
            name = name if name != holder else f"{name} Junior"
        elif roll < 0.03:
            name = holder.split()[0]
        elif roll < 0.10:
            name = " ".join(reversed(holder.upper().split()))  # surname first, capitals: still a match
        else:
            name = holder
        yield number, name


def iter_payroll(people: Iterable[tuple[str, str]], cycle: str, seed: int) -> Iterator[list[str]]:
    """One sheet row per payee, referenced ``<cycle>-<index>``: amounts 20.00 to 150.00 with random cents
    (fresh amounts per `seed`)."""
    rng = random.Random(seed)
    for i, (number, name) in enumerate(people):
        amount = f"{rng.randrange(2000, 15000) / 100:.2f}"
        yield [f"{cycle}-{i:06d}", name, amount, "GHS", "mtn", "msisdn", number, ""]


def payees(n: int, seed: int = 15) -> list[tuple[str, str]]:
    """`iter_payees` as a list."""
    return list(iter_payees(n, seed))


def payroll(people: Iterable[tuple[str, str]], cycle: str, seed: int) -> list[list[str]]:
    """`iter_payroll` as a list."""
    return list(iter_payroll(people, cycle, seed))


@dataclass(frozen=True)
class SheetFile:
    """A payroll written to disk: what a run of it must pay, and what writing it cost."""

    path: Path
    format: Format
    rows: int
    amount_total: Decimal
    write_s: float

    def figures(self) -> dict[str, object]:
        return {
            "format": self.format,
            "rows": self.rows,
            "amount_total": str(self.amount_total),
            "bytes": self.path.stat().st_size,
            "write_s": self.write_s,
        }


class _Totals:
    """Counts the rows and adds up the amounts passing through, on their way to a writer."""

    def __init__(self, rows: Iterable[list[str]]) -> None:
        self._rows = rows
        self.count = 0
        self.amount = Decimal(0)

    def __iter__(self) -> Iterator[list[str]]:
        for row in self._rows:
            self.count += 1
            self.amount += Decimal(row[2])
            yield row


def write_csv(path: Path, rows: Iterable[list[str]], headers: list[str] = HEADERS) -> Path:
    """The rows as a csv sheet, written as they come."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(headers)
        writer.writerows(rows)
    return path


def write_payroll(path: Path, fmt: Format, rows: Iterable[list[str]]) -> SheetFile:
    """`rows` written as a `fmt` sheet at `path` (its suffix set to the format), counted and totalled."""
    path = path.with_suffix(f".{fmt}")
    totals = _Totals(rows)
    t0 = time.perf_counter()
    if fmt == "csv":
        write_csv(path, totals)
    else:
        write_sheet(path, totals)
    return SheetFile(path, fmt, totals.count, totals.amount, round(time.perf_counter() - t0, 2))


def cycle_sheet(directory: Path, name: str, fmt: Format, n: int, cycle: str, seed: int) -> SheetFile:
    """Cycle `cycle` of the payroll of `n` payees (the same payees for every cycle), written at
    ``directory/name.<fmt>``."""
    if fmt == "xlsx" and n > XLSX_MAX_ROWS:
        raise ValueError(f"an xlsx sheet holds at most {XLSX_MAX_ROWS:,} rows: write csv")
    return write_payroll(directory / name, fmt, iter_payroll(iter_payees(n), cycle, seed))
