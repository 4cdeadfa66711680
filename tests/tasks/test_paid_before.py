"""Paid before (issue 47, tasks/payouts/paid_before.py): a sheet or its rows sent in the last days are found
in what runs recorded before sending (a digest of payee number, amount and currency per row, the sheet's
fingerprint per run), looked up a chunk of rows per query; the same label only replays, another label is a
second payment that becomes an approval finding to acknowledge."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from payops.store import migrate, open_engine
from payops.store.approval_requests import RequestView
from payops.store.reconciliation import IntendedPayout, ReconciliationStore
from payops.store.retries import RetryRow, RetryRows
from payops.tasks.approval.approval_gate import findings
from payops.tasks.payouts.paid_before import PAID_BEFORE, paid_before, row_digest
from sqlalchemy import event

NOW = datetime(2026, 12, 4, 8, 8, tzinfo=UTC)


@dataclass
class Row:
    row: int
    destination: str
    amount: Decimal
    currency: str = "GHS"
    payee_name: str = "Ama Mensah"
    reference: str | None = None


def rows(n: int, start: int = 0) -> list[Row]:
    return [Row(i + 2, f"23324{i + start:07d}", Decimal("100.00") + Decimal(i) / 100) for i in range(n)]


def intended(label: str, sheet_rows: list[Row]) -> list[IntendedPayout]:
    return [
        IntendedPayout(
            f"{label}-r{r.row}",
            r.row,
            str(r.amount),
            r.currency,
            None,
            None,
            row_digest(r.destination, r.amount, r.currency),
        )
        for r in sheet_rows
    ]


@pytest.fixture
def store(tmp_path: Path) -> ReconciliationStore:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    migrate(engine)
    return ReconciliationStore(engine)


def test_a_payee_number_is_compared_without_spaces_or_punctuation() -> None:
    assert row_digest("+233 24-000 0001", Decimal("100"), "ghs") == row_digest(
        "233240000001", Decimal("100.00"), "GHS"
    )
    assert row_digest("233240000001", Decimal("100.01"), "GHS") != row_digest(
        "233240000001", Decimal("100"), "GHS"
    )


def test_a_sheet_paid_under_its_label_only_replays_and_under_another_label_is_a_second_payment(
    store: ReconciliationStore,
) -> None:
    sheet = rows(1200)  # more than a lookup chunk, recorded in parts as a large run records them
    payouts = intended("nov", sheet)
    store.record_intent("nov", NOW - timedelta(hours=2), payouts[:500], sheet="sheet-abc", name="november")
    store.record_intent("nov", NOW - timedelta(hours=1), payouts[500:], first=False)

    same = paid_before(store, sheet, "nov", "sheet-abc", 30, now=NOW)
    (earlier,) = same.earlier
    assert (earlier.label, earlier.name, earlier.rows, earlier.matched) == ("nov", "november", 1200, 1200)
    assert earlier.same_sheet and earlier.replay and not same.second_payment and same.finding() == {}
    assert same.lines() == [
        "run november (label nov) sent this same sheet (1,200 rows) on 2026-12-04 at 06:08 UTC; this run "
        "sends them with the same label, so paying again only replays it: nothing is paid twice"
    ]

    part = sheet[100:103] + rows(2, start=5000)  # three rows of it, two payees it never paid
    again = paid_before(store, part, "dec", "sheet-def", 30, now=NOW)
    (earlier,) = again.earlier
    assert (earlier.matched, earlier.same_sheet, earlier.replay) == (3, False, False)
    assert again.second_payment and again.finding() == {PAID_BEFORE: [102, 103, 104]}
    assert again.lines() == [
        "run november (label nov) sent 3 of this sheet's 5 rows (same payee number, amount and currency) on "
        "2026-12-04 at 06:08 UTC; this run sends them under another label, so paying would pay them a second "
        "time: the approver must acknowledge it"
    ]
    # Rows carrying the references they were sent with are only replayed, whatever the label.
    own = [Row(r.row, r.destination, r.amount, reference=f"nov-r{r.row}") for r in part[:3]]
    replayed = paid_before(store, own, "dec", None, 30, now=NOW)
    assert not replayed.second_payment and replayed.earlier[0].matched == 3
    assert "with the same references, so paying again only replays it" in replayed.lines()[0]
    assert paid_before(store, part, "dec", None, 30, now=NOW + timedelta(days=31)).earlier == []  # too old
    assert paid_before(store, part, "dec", None, 0, now=NOW).earlier == []  # turned off


def test_the_lookup_is_a_query_per_chunk_of_rows_not_per_row(store: ReconciliationStore) -> None:
    sheet = rows(1200)
    store.record_intent("nov", NOW, intended("nov", sheet), sheet="sheet-abc")
    queries: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: queries.append(a[2]))
    found = paid_before(store, iter(sheet), "dec", "sheet-xyz", 30, now=NOW)  # read once, as it goes
    assert found.second_rows == [r.row for r in sheet]
    assert sum("recon_run_rows" in q for q in queries) == 3  # 1,200 rows: 3 chunks of 500
    plans = (
        store.engine.connect()
        .exec_driver_sql("EXPLAIN QUERY PLAN SELECT label FROM recon_run_rows WHERE digest IN ('a', 'b')")
        .fetchall()
    )
    assert any("ix_recon_run_rows_digest" in str(p) for p in plans)


def test_a_retry_of_failed_rows_is_not_a_second_payment_of_its_run(store: ReconciliationStore) -> None:
    sheet = rows(3)
    store.record_intent("nov", NOW, intended("nov", sheet), sheet="sheet-abc")
    retries = RetryRows(store.engine)
    retries.record("nov", [RetryRow("nov-rs-1", ("a",), ("1",))])
    retries.claim("nov", "nov-retry1", ["nov-rs-1"])
    found = paid_before(
        store, sheet[:1], "nov-retry1", "sheet-r", 30, retried=retries.ancestors("nov-retry1"), now=NOW
    )
    assert found.earlier == [] and not found.second_payment


def test_a_second_payment_is_a_finding_the_approver_must_acknowledge(store: ReconciliationStore) -> None:
    from payops.deployments.approving import missing_acknowledgements

    sheet = rows(2)
    store.record_intent("nov", NOW, intended("nov", sheet), sheet="sheet-abc")
    paid = paid_before(store, sheet, "dec", "sheet-def", 30, now=NOW)
    found = findings(sheet, [], True, paid)  # type: ignore[arg-type]
    assert found == {PAID_BEFORE: [2, 3]}
    request = RequestView(
        "run", "dec", "console", "olu", "olu", 1, (), "", "f", {}, 2, found, NOW, NOW, "waiting", None
    )
    assert missing_acknowledgements(request, []) == [
        "2 paid recently by another run: approving pays them a second time (rows 2, 3)"
    ]
    assert missing_acknowledgements(request, [PAID_BEFORE]) == []
    assert findings(sheet, [], True, paid_before(store, sheet, "nov", "sheet-abc", 30, now=NOW)) == {}  # type: ignore[arg-type]
