"""The reconciliation tables: a run's approved payouts, checks with differences, a close's snapshots and open
items; on SQLite (default) and PostgreSQL (shared setups)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from payops.store import migrate, open_engine
from payops.store.reconciliation import Difference, IntendedPayout, ReconciliationStore

T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def exercise(url: str) -> None:
    engine = open_engine(url)
    try:
        migrate(engine)
        store = ReconciliationStore(engine)
        payouts = [IntendedPayout(f"nov-r{i}", i, "10.50", "GHS", "0.50", "0.60") for i in range(2, 1202)]
        store.record_intent("nov", T0, payouts)
        store.record_intent("nov", T0, payouts)  # a re-run of the label replaces, never doubles
        assert len(store.intended("nov")) == 1200 and store.run("nov").status == "pending"
        dec = [IntendedPayout(f"dec-r{i}", i, "10.50", "GHS", "0.50", "0.60") for i in range(2, 1202)]
        store.record_intent("dec", T0, dec[:500])  # a large run records its payouts in parts
        store.record_intent("dec", T0 + timedelta(minutes=1), dec[500:900], first=False)
        store.record_intent("dec", T0 + timedelta(minutes=2), dec[900:], first=False)
        assert store.run("dec").rows == 1200 and store.run("dec").sent_from == T0
        chunks = list(store.intended_chunks("dec", 500))
        assert [len(c) for c in chunks] == [500, 500, 200]
        assert sorted(p.reference for c in chunks for p in c) == sorted(p.reference for p in dec)
        store.record_intent("dec", T0, dec[:3])  # a re-run's first part replaces the earlier record
        assert store.run("dec").rows == 3 and len(store.intended("dec")) == 3
        assert store.labels_of(["nov-r2", "nov-r1201", "other"]) == {"nov-r2": "nov", "nov-r1201": "nov"}
        store.mark_ended("nov", T0 + timedelta(minutes=5))
        assert store.run("nov").ended_at == T0 + timedelta(minutes=5)

        diff = Difference("fee_outside_bound", "nov-r2", "nov", "GHS", "0.50..0.60", "3.00", "re-recorded")
        store.save_check("run", "nov", "run-end", "differences", {"rows": 1200}, [diff], checked_at=T0)
        assert store.run("nov").status == "differences"
        item = {
            "transaction_id": "txn_1",
            "kind": "payout",
            "reference": "nov-r3",
            "currency": "GHS",
            "status": "held",
            "created_at": T0,
            "booked": "0.00",
        }
        close = store.save_check(
            "day",
            "2026-11-22",
            "schedule",
            "clean",
            {"transactions": 5},
            [],
            checked_at=T0 + timedelta(days=1),
            snapshots={"GHS": ("1000.00", "10.50")},
            open_items=[item],
        )
        last = store.last_close()
        assert last is not None and last.id == close and last.snapshots == {"GHS": ("1000.00", "10.50")}
        assert last.taken_at == T0 + timedelta(days=1)
        assert store.open_items(close) == [item]
        history = store.checks()
        assert [c.scope for c in history] == ["day", "run"] and history[1].differences == [diff]
        assert store.checks("run", "nov")[0].summary == {"rows": 1200}
    finally:
        engine.dispose()


def test_reconciliation_tables_on_sqlite(tmp_path: Path) -> None:
    exercise(f"sqlite:///{tmp_path / 'payops.sqlite3'}")


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    from payops.deployments.demo import free_port
    from payops.deployments.scaleout.postgres import PrivatePostgres

    with PrivatePostgres(free_port()) as pg:
        yield pg.url.replace("postgresql+asyncpg://", "postgresql+psycopg://")


@pytest.mark.e2e
def test_reconciliation_tables_on_postgresql(postgres_url: str) -> None:
    exercise(postgres_url)
