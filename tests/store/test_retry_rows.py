"""store/retries.py: a failed row is claimed by at most one retry, a retry label holds one set of rows, and
claims made at the same time from several threads never overlap (SQLite; PostgreSQL in the e2e marker)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.store import migrate, open_engine
from payops.store.retries import RetryConflict, RetryRow, RetryRows

HEADERS = ("reference", "amount", "destination")


def row(ref: str) -> RetryRow:
    return RetryRow(ref, HEADERS, (ref, "10.50", "+233 24 123 0001"), "Staff Mobile=destination")


@pytest.fixture
def rows(tmp_path: Path) -> Iterator[RetryRows]:
    engine = open_engine(f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    migrate(engine)
    try:
        yield RetryRows(engine)
    finally:
        engine.dispose()


def test_rows_are_recorded_once_and_claimed_by_one_retry(rows: RetryRows) -> None:
    assert rows.record("march", [row("A-rs1"), row("B-rs1")], run_id="run-1") == 2
    assert rows.record("march", [row("A-rs1"), row("C-rs1")], run_id="run-2") == 1  # a re-run records again
    assert rows.label_of_run("run-2") == "march" and rows.label_of_run("run-1") is None
    assert [r.reference for r in rows.unclaimed("march")] == ["A-rs1", "B-rs1", "C-rs1"]
    assert rows.unclaimed("march")[0] == row("A-rs1")  # cells and mapping kept as recorded

    rows.claim("march", "march-retry1", ["A-rs1", "B-rs1"])
    rows.claim("march", "march-retry1", ["B-rs1", "A-rs1"])  # the same retry again: granted (a replay)
    assert rows.claims("march") == {"A-rs1": "march-retry1", "B-rs1": "march-retry1"}
    assert [r.reference for r in rows.claimed_by("march-retry1")] == ["A-rs1", "B-rs1"]
    assert [r.reference for r in rows.unclaimed("march")] == ["C-rs1"]

    with pytest.raises(RetryConflict, match="retried already by march-retry1"):
        rows.claim("march", "march-retry2", ["A-rs1", "C-rs1"])
    with pytest.raises(RetryConflict, match="taken by a retry of other rows"):
        rows.claim("march", "march-retry1", ["A-rs1", "B-rs1", "C-rs1"])
    with pytest.raises(RetryConflict, match="not recorded as failed"):
        rows.claim("march", "march-retry2", ["C-rs1", "Z-rs1"])
    assert rows.claims("march") == {"A-rs1": "march-retry1", "B-rs1": "march-retry1"}  # nothing moved

    rows.record("march", [row("A-rs1")])  # recording again never undoes a claim
    rows.claim("march", "march-retry2", ["C-rs1"])
    assert rows.retries("march") == {"march-retry1": 2, "march-retry2": 1}
    assert rows.labels_starting("march-retry") == {"march-retry1", "march-retry2"}
    assert rows.labels_starting("marc_-retry") == set()  # LIKE wildcards in a label are taken literally


def test_claims_at_the_same_time_never_share_a_row(rows: RetryRows) -> None:
    refs = [f"R{i}-rs1" for i in range(40)]
    rows.record("april", [row(r) for r in refs])
    granted: list[str] = []
    refused: list[str] = []
    barrier = threading.Barrier(6)

    def claim(label: str) -> None:
        barrier.wait()
        try:
            rows.claim("april", label, refs)
            granted.append(label)
        except RetryConflict:
            refused.append(label)

    threads = [threading.Thread(target=claim, args=(f"april-retry{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(granted) == 1 and len(refused) == 5
    assert set(rows.claims("april").values()) == set(granted)
