"""A run's validated rows, row problems and outcomes in a spill file, not in lists: memory that does not grow
with the sheet.

One SQLite file (stdlib ``sqlite3``; the payops database is for what outlives a run) per run, in a directory
the run owns. It holds only what the sheet and the service determine: batches are built from it exactly as
`tasks.payouts.batching.build_batch` builds them from a list (same references, same Idempotency-Keys), so a
crashed run is re-run from the sheet with the same label, its spill rebuilt, and its batches replay: nothing
in the spill needs to survive a crash, which is why it is written without a journal.

Rows are read back in sheet order, a chunk at a time; cross-row checks (references used twice, the same
payee and amount twice) are SQL groupings over the whole sheet, so a sheet read in chunks gets the same
findings as one read whole (`tasks.intake.streaming`).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import astuple, fields
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES
from payops.tasks.payouts.batching import MAX_BATCH, PayoutBatch, batch_of
from payops.tasks.payouts.fee_pricing import FeeRange
from payops.tasks.rows.outcome import RowOutcome
from payops.tasks.rows.payout_row import PayoutRow, RowIssue
from payops.tasks.rows.trusted_row import row_constructor
from payops.tasks.wire.money import money

if TYPE_CHECKING:  # imported where used: they import Prefect, which `payops check` never loads
    from payops.tasks.payouts.polling import PayoutState
    from payops.tasks.rows.name_check import NameCheck

_SCHEMA = """
CREATE TABLE rows (
    pos INTEGER PRIMARY KEY,  -- sheet order of the valid rows, from 0
    row INTEGER NOT NULL UNIQUE,
    reference TEXT, amount TEXT NOT NULL, currency TEXT NOT NULL, provider TEXT NOT NULL,
    destination_type TEXT NOT NULL, destination TEXT NOT NULL, payee_name TEXT, note TEXT, extra TEXT,
    destination_cell TEXT NOT NULL  -- the destination as written: what a repeated-payee warning quotes
);
CREATE TABLE refs (row INTEGER PRIMARY KEY, folded TEXT NOT NULL, cell TEXT NOT NULL);
CREATE INDEX refs_folded ON refs (folded);
CREATE TABLE issues (
    kind TEXT NOT NULL, row INTEGER NOT NULL, col INTEGER NOT NULL, column TEXT NOT NULL, value TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX issues_order ON issues (kind, row, col);
CREATE TABLE cells (row INTEGER PRIMARY KEY, cells TEXT NOT NULL);  -- every data row as read (JSON list)
CREATE TABLE fees (row INTEGER PRIMARY KEY, low TEXT NOT NULL, high TEXT NOT NULL);
CREATE TABLE names (
    row INTEGER PRIMARY KEY, destination TEXT NOT NULL, sheet_name TEXT NOT NULL, holder TEXT,
    verdict TEXT NOT NULL
);
CREATE TABLE states (  -- accepted payouts while the run follows them
    row INTEGER PRIMARY KEY, reference TEXT NOT NULL, status TEXT NOT NULL, fee TEXT, failure_reason TEXT,
    completed_at TEXT, created_at TEXT
);
"""
_OUTCOME_FIELDS = [f.name for f in fields(RowOutcome)]
# The outcomes table has a column per RowOutcome field (the row first), so the spill keeps what reports read.
_SCHEMA += (
    "CREATE TABLE outcomes (row INTEGER PRIMARY KEY, "
    + ", ".join(f"{name} TEXT" for name in _OUTCOME_FIELDS if name != "row")
    + ");"
)
_ROW_FIELDS = (
    "row, reference, amount, currency, provider, destination_type, destination, payee_name, note, extra"
)


class RowSpill:
    """Validated rows, row problems and outcomes of one run, in the SQLite file ``path`` (created empty)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Used by the flow's event loop and by the worker threads it hands phases to, one at a time.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-8000;")
        self._db.executescript(_SCHEMA)
        self._count = 0

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RowSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # rows ------------------------------------------------------------------------------------------------

    def append(self, rows: Iterable[PayoutRow], destination_cells: Iterable[str]) -> None:
        """Valid rows in sheet order (each with its destination cell as written)."""
        start = self._count
        values = [
            (
                start + k,
                r.row,
                r.reference,
                money(r.amount),
                r.currency,
                r.provider,
                r.destination_type,
                r.destination,
                r.payee_name,
                r.note,
                json.dumps(r.extra, ensure_ascii=False) if r.extra else None,
                cell,
            )
            for k, (r, cell) in enumerate(zip(rows, destination_cells, strict=True))
        ]
        self._write("INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", values)
        self._count += len(values)

    def __len__(self) -> int:
        return self._count

    def rows(self, start: int = 0, stop: int | None = None, chunk: int = 5_000) -> Iterator[PayoutRow]:
        """Valid rows ``[start, stop)`` in sheet order, read a chunk at a time."""
        stop = self._count if stop is None else min(stop, self._count)
        while start < stop:
            end = min(stop, start + chunk)
            cursor = self._db.execute(
                f"SELECT {_ROW_FIELDS} FROM rows WHERE pos >= ? AND pos < ? ORDER BY pos", (start, end)
            )
            yield from map(_row, cursor)
            start = end

    def rows_between(self, first: int, last: int) -> Iterator[PayoutRow]:
        """Valid rows of sheet rows ``first`` to ``last`` (inclusive), in sheet order."""
        cursor = self._db.execute(
            f"SELECT {_ROW_FIELDS} FROM rows WHERE row BETWEEN ? AND ? ORDER BY row", (first, last)
        )
        return map(_row, cursor)

    def batch_count(self, size: int = MAX_BATCH) -> int:
        return -(-self._count // size)

    def batch(self, label: str, index: int, size: int = MAX_BATCH) -> PayoutBatch:
        """Batch ``index``: the one `build_batch` makes of the same rows held in a list."""
        if not 0 <= index < self.batch_count(size):
            raise IndexError(f"batch {index} of {self.batch_count(size)}")
        return batch_of(list(self.rows(index * size, (index + 1) * size)), label, index)

    def drop(self, rows: Iterable[int]) -> None:
        """Take rows out of the valid ones (refused after the fact: a repeated reference); renumbers."""
        self._write("DELETE FROM rows WHERE row = ?", [(r,) for r in rows])
        self._db.executescript(
            "CREATE TEMP TABLE kept AS SELECT * FROM rows ORDER BY pos; DELETE FROM rows;"
            "INSERT INTO rows SELECT rowid - 1, row, reference, amount, currency, provider, destination_type,"
            " destination, payee_name, note, extra, destination_cell FROM kept; DROP TABLE kept;"
        )
        self._count = self._db.execute("SELECT count(*) FROM rows").fetchone()[0]

    # cross-row checks ----------------------------------------------------------------------------------

    def note_references(self, entries: Iterable[tuple[int, str, str]]) -> None:
        """``(row, reference, its cell as written)`` of every row with a readable reference, valid or not."""
        self._write(
            "INSERT INTO refs VALUES (?,?,?)", [(row, ref.casefold(), cell) for row, ref, cell in entries]
        )

    def repeated_references(self) -> Iterator[list[tuple[int, str]]]:
        """Groups of ``(row, cell)`` sharing a reference (ignoring case), each in row order."""
        cursor = self._db.execute(
            "SELECT folded, row, cell FROM refs WHERE folded IN "
            "(SELECT folded FROM refs GROUP BY folded HAVING count(*) > 1) ORDER BY folded, row"
        )
        yield from _grouped(cursor)

    def repeated_payees(self) -> Iterator[list[tuple[int, str]]]:
        """Groups of valid ``(row, destination cell)`` with the same destination type, destination and
        amount, each in row order, groups in the order of their first row."""
        cursor = self._db.execute(
            "SELECT k, row, destination_cell FROM (SELECT destination_type || '|' || destination || '|' || "
            "amount AS k, row, destination_cell, count(*) OVER (PARTITION BY destination_type, destination, "
            "amount) AS n, min(row) OVER (PARTITION BY destination_type, destination, amount) AS first "
            "FROM rows) WHERE n > 1 ORDER BY first, row"
        )
        yield from _grouped(cursor)

    # row problems --------------------------------------------------------------------------------------

    def add_issues(self, kind: str, found: Iterable[tuple[RowIssue, int]]) -> None:
        """Errors or warnings (``kind``), each with its column's position in the sheet."""
        self._write(
            "INSERT INTO issues VALUES (?,?,?,?,?,?)",
            [(kind, i.row, col, i.column, i.value, i.message) for i, col in found],
        )

    def issues(self, kind: str) -> Iterator[RowIssue]:
        """Errors or warnings by row, then column order."""
        cursor = self._db.execute(
            "SELECT row, column, value, message FROM issues WHERE kind = ? ORDER BY row, col, value, message",
            (kind,),
        )
        for row, column, value, message in cursor:
            yield RowIssue(row, column, value, message)

    def issue_count(self, kind: str) -> int:
        return self._db.execute("SELECT count(*) FROM issues WHERE kind = ?", (kind,)).fetchone()[0]

    def rows_with_errors(self) -> int:
        return self._db.execute("SELECT count(DISTINCT row) FROM issues WHERE kind = 'error'").fetchone()[0]

    # outcomes ------------------------------------------------------------------------------------------

    def record(self, outcomes: Iterable[RowOutcome]) -> None:
        """What happened to rows (a later record of a row replaces the earlier)."""
        marks = ",".join("?" * len(_OUTCOME_FIELDS))
        self._write(f"INSERT OR REPLACE INTO outcomes VALUES ({marks})", [astuple(o) for o in outcomes])

    def outcomes(self, chunk: int = 5_000) -> Iterator[RowOutcome]:
        """Every recorded outcome, by row, read a chunk at a time."""
        last = -1
        while True:
            page = self._db.execute(
                f"SELECT {', '.join(_OUTCOME_FIELDS)} FROM outcomes WHERE row > ? ORDER BY row LIMIT ?",
                (last, chunk),
            ).fetchall()
            if not page:
                return
            for values in page:
                yield RowOutcome(*values)
            last = page[-1][0]

    def outcome_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM outcomes").fetchone()[0]

    def outcomes_between(self, first: int, last: int) -> dict[int, RowOutcome]:
        """The recorded outcomes of sheet rows ``first`` to ``last`` (inclusive), by row."""
        cursor = self._db.execute(
            f"SELECT {', '.join(_OUTCOME_FIELDS)} FROM outcomes WHERE row BETWEEN ? AND ?", (first, last)
        )
        return {values[0]: RowOutcome(*values) for values in cursor}

    # the sheet as read ----------------------------------------------------------------------------------

    def add_cells(self, rows: Iterable[tuple[int, Iterable[str]]]) -> None:
        """Data rows as read, valid or not: ``(sheet row, its cells in column order)`` (what reports and the
        retry sheet write back)."""
        self._write(
            "INSERT OR REPLACE INTO cells VALUES (?,?)",
            [(row, json.dumps(list(cells), ensure_ascii=False)) for row, cells in rows],
        )

    def cells(self, rows: Iterable[int] | None = None, chunk: int = 5_000) -> Iterator[tuple[int, list[str]]]:
        """``(row, cells)`` of the given rows (every row when None), by row, a chunk at a time."""
        if rows is not None:
            wanted = sorted(set(rows))
            for k in range(0, len(wanted), 500):
                part = wanted[k : k + 500]
                marks = ",".join("?" * len(part))
                cursor = self._db.execute(
                    f"SELECT row, cells FROM cells WHERE row IN ({marks}) ORDER BY row", part
                )
                for row, text in cursor:
                    yield row, json.loads(text)
            return
        last = -1
        while True:
            page = self._db.execute(
                "SELECT row, cells FROM cells WHERE row > ? ORDER BY row LIMIT ?", (last, chunk)
            ).fetchall()
            if not page:
                return
            for row, text in page:
                yield row, json.loads(text)
            last = page[-1][0]

    def cell_rows(self) -> int:
        return self._db.execute("SELECT count(*) FROM cells").fetchone()[0]

    # the pre-flight's findings by row --------------------------------------------------------------------

    def add_fees(self, fees: Mapping[int, FeeRange]) -> None:
        """Each row's fee bound (a later one for a row replaces the earlier)."""
        self._write(
            "INSERT OR REPLACE INTO fees VALUES (?,?,?)",
            [(row, str(f.low), str(f.high)) for row, f in fees.items()],
        )

    def fees_between(self, first: int, last: int) -> dict[int, FeeRange]:
        cursor = self._db.execute("SELECT row, low, high FROM fees WHERE row BETWEEN ? AND ?", (first, last))
        return {row: FeeRange(Decimal(low), Decimal(high)) for row, low, high in cursor}

    def add_names(self, checks: Iterable[NameCheck]) -> None:
        self._write(
            "INSERT OR REPLACE INTO names VALUES (?,?,?,?,?)",
            [(n.row, n.destination, n.sheet_name, n.holder_name, n.verdict) for n in checks],
        )

    def name_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM names").fetchone()[0]

    def name_rows(self, chunk: int = 5_000) -> Iterator[int]:
        """The rows with a name check, in sheet order, read a chunk at a time."""
        last = -1
        while page := [
            r
            for (r,) in self._db.execute(
                "SELECT row FROM names WHERE row > ? ORDER BY row LIMIT ?", (last, chunk)
            )
        ]:
            yield from page
            last = page[-1]

    def names_between(self, first: int, last: int) -> dict[int, NameCheck]:
        cursor = self._db.execute(
            "SELECT row, destination, sheet_name, holder, verdict FROM names WHERE row BETWEEN ? AND ?",
            (first, last),
        )
        from payops.tasks.rows.name_check import NameCheck

        return {v[0]: NameCheck(*v) for v in cursor}

    # payouts followed --------------------------------------------------------------------------------------

    def put_states(self, states: Iterable[tuple[int, PayoutState]]) -> None:
        """``(sheet row, its payout's last known state)``; a later state of a row replaces the earlier."""
        self._write(
            "INSERT OR REPLACE INTO states VALUES (?,?,?,?,?,?,?)",
            [
                (
                    row,
                    s.reference,
                    s.status,
                    s.fee,
                    s.failure_reason,
                    s.completed_at,
                    s.created_at.isoformat() if s.created_at else None,
                )
                for row, s in states
            ],
        )

    def state_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM states").fetchone()[0]

    def states_between(self, first: int, last: int) -> dict[int, PayoutState]:
        """The followed payouts of sheet rows ``first`` to ``last`` (inclusive), by row."""
        return self._states("row BETWEEN ? AND ?", (first, last))

    def states_not_final(self) -> dict[int, PayoutState]:
        """The followed payouts not final at their last known status, by row."""
        final = sorted(PAYOUT_FINAL_STATUSES)
        return self._states(f"status NOT IN ({','.join('?' * len(final))})", final)

    def _states(self, where: str, args: Iterable[object]) -> dict[int, PayoutState]:
        from payops.tasks.payouts.polling import PayoutState

        cursor = self._db.execute(
            "SELECT row, reference, status, fee, failure_reason, completed_at, created_at FROM states "
            f"WHERE {where}",
            tuple(args),
        )
        return {
            row: PayoutState(ref, status, fee, reason, done, datetime.fromisoformat(made) if made else None)
            for row, ref, status, fee, reason, done, made in cursor
        }

    def _write(self, sql: str, values: list[tuple[object, ...]]) -> None:
        self._db.execute("BEGIN")
        self._db.executemany(sql, values)
        self._db.execute("COMMIT")


def _row(values: tuple[object, ...]) -> PayoutRow:
    row, reference, amount, currency, provider, dtype, destination, name, note, extra = values
    return row_constructor()(  # as the intake builds them: a row read back costs what a row read did
        row,
        reference,
        Decimal(str(amount)),
        sys.intern(currency),  # the same few codes on every row: one string each, not one per row
        sys.intern(provider),
        sys.intern(dtype),
        destination,
        name,
        note,
        json.loads(str(extra)) if extra else {},
    )


def _grouped(cursor: sqlite3.Cursor) -> Iterator[list[tuple[int, str]]]:
    group: list[tuple[int, str]] = []
    key = None
    for k, row, cell in cursor:
        if group and k != key:
            yield group
            group = []
        key = k
        group.append((row, cell))
    if group:
        yield group
