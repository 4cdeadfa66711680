"""A run's approved payouts and the service's records of it, as compact rows in a temporary SQLite file, read
back a range of references at a time: what lets a run of any size be reconciled in bounded memory.

One file (stdlib ``sqlite3``) in a scratch directory the file owns and deletes when closed (one a killed
process left is swept by the next, `tasks.runtime.scratch`). Two tables,
each keyed by the reference: ``intended`` (what payops approved) and ``records`` (what the service holds; a
reference written again replaces the earlier record, as the last read wins). Their columns are the caller's
(`tasks.ledger.run_reconciliation`: cents and text, never pydantic models); the values come back as written.
References are compared as SQLite's ``BINARY`` collation does, which orders them as Python orders ``str``
(and as pandas sorts a join's keys), whatever the payops database's own collation is.

Nothing here needs to survive a crash (a check is re-run from the service), hence no journal.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from payops.tasks.runtime.scratch import scratch_dir

Row = tuple[Any, ...]


class RunMatchFile:
    """The ``intended`` and ``records`` tables of one run check (each table's first column: ``reference``)."""

    def __init__(
        self, intended_columns: Sequence[str], record_columns: Sequence[str], directory: Path | None = None
    ) -> None:
        if intended_columns[0] != "reference" or record_columns[0] != "reference":
            raise ValueError("the first column of each table is the reference")
        self._dir = scratch_dir("run-match", directory)
        self.path = Path(self._dir.name) / "match.sqlite3"
        # One check at a time uses it, from the event loop and from worker threads in turn (never at once).
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-8000;")
        self._widths = {"intended": len(intended_columns), "records": len(record_columns)}
        for table, columns in (("intended", intended_columns), ("records", record_columns)):
            rest = "".join(f", {name}" for name in columns[1:])
            self._db.execute(f"CREATE TABLE {table} (reference TEXT PRIMARY KEY{rest}) WITHOUT ROWID")

    def close(self) -> None:
        """Close and delete the file."""
        self._db.close()
        self._dir.cleanup()

    def __enter__(self) -> RunMatchFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing ---------------------------------------------------------------------------------------------

    def add_intended(self, rows: Iterable[Row]) -> None:
        """Approved payouts (a reference once each)."""
        self._write("INSERT INTO", "intended", rows)

    def put_records(self, rows: Iterable[Row]) -> None:
        """Service records; one whose reference is already held replaces it."""
        self._write("INSERT OR REPLACE INTO", "records", rows)

    def _write(self, verb: str, table: str, rows: Iterable[Row]) -> None:
        marks = ",".join("?" * self._widths[table])
        self._db.execute("BEGIN")
        try:
            self._db.executemany(f"{verb} {table} VALUES ({marks})", rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # reading ---------------------------------------------------------------------------------------------

    def intended_count(self) -> int:
        """How many approved payouts the file holds."""
        return int(self._db.execute("SELECT count(*) FROM intended").fetchone()[0])

    def intended_among(self, references: Sequence[str]) -> set[str]:
        """Which of ``references`` (a page's worth: at most a few hundred) are approved payouts."""
        if not references:
            return set()
        marks = ",".join("?" * len(references))
        found = self._db.execute(f"SELECT reference FROM intended WHERE reference IN ({marks})", references)
        return {ref for (ref,) in found}

    def unlisted(self, size: int) -> Iterator[list[str]]:
        """Approved references no record is held for, in order, in lists of at most ``size``; each list is
        read when the previous one has been handled (records put meanwhile leave the next lists)."""
        after = ""
        while True:
            part = [
                ref
                for (ref,) in self._db.execute(
                    "SELECT reference FROM intended WHERE reference > ? AND reference NOT IN "
                    "(SELECT reference FROM records) ORDER BY reference LIMIT ?",
                    (after, size),
                )
            ]
            if part:
                yield part
            if len(part) < size:
                return
            after = part[-1]

    def chunks(self, size: int) -> Iterator[tuple[list[Row], list[Row]]]:
        """Both tables, a range of references at a time and in order: each range holds at most ``size``
        approved payouts and ``size`` records, and every reference of either table is in exactly one."""
        low = ""  # below every reference (a reference is never empty)
        while True:
            highs = [
                self._nth_after(table, low, size) for table in ("intended", "records")
            ]  # the size-th reference of each table after `low` (None: fewer are left)
            bounded = [h for h in highs if h is not None]
            high = min(bounded) if bounded else None
            intended, records = self._range("intended", low, high), self._range("records", low, high)
            if intended or records:
                yield intended, records
            if high is None:
                return
            low = high

    def _nth_after(self, table: str, low: str, n: int) -> str | None:
        found = self._db.execute(
            f"SELECT reference FROM {table} WHERE reference > ? ORDER BY reference LIMIT 1 OFFSET ?",
            (low, n - 1),
        ).fetchone()
        return None if found is None else found[0]

    def _range(self, table: str, low: str, high: str | None) -> list[Row]:
        if high is None:
            q = f"SELECT * FROM {table} WHERE reference > ? ORDER BY reference"
            return self._db.execute(q, (low,)).fetchall()
        q = f"SELECT * FROM {table} WHERE reference > ? AND reference <= ? ORDER BY reference"
        return self._db.execute(q, (low, high)).fetchall()
