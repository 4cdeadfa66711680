"""Run reconciliation in bounded memory: a run matched a few references at a time (through its match file)
finds what one match of the whole run finds, every difference kind, in the same order; a run recorded in
parts reconciles as one recorded at once. Against the emulator (ASGI, a manual clock)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from payops.store import migrate, open_engine
from payops.store.reconciliation import IntendedPayout, ReconciliationStore
from payops.tasks.ledger import run_reconciliation as rr
from payops.tasks.ledger.run_reconciliation import reconcile_run
from payops.tasks.wire.references import row_reference

from tests.connectors.payments_emulator import Emulator, make_emulator

LABEL = "chk"
ADMIN = "/_sandbox/businesses/demo/test"


def intended(row: int, amount: str = "10.00") -> IntendedPayout:
    return IntendedPayout(row_reference(LABEL, row), row, amount, "GHS", "0.00", "1.00")


def store_at(path: Path) -> ReconciliationStore:
    engine = open_engine(f"sqlite:///{path}")
    migrate(engine)
    return ReconciliationStore(engine)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[ReconciliationStore]]:
    made = [store_at(tmp_path / f"payops{i}.sqlite3") for i in range(2)]
    yield made
    for s in made:
        s.engine.dispose()


async def admin(emu: Emulator, path: str, body: dict | None = None) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=emu.app), base_url="http://sandbox") as c:
        r = await c.post(f"{ADMIN}/{path}", json=body)
        assert r.status_code == 200, r.text


async def send(emu: Emulator, rows: range, amount: str = "10.00") -> None:
    for row in rows:
        await emu.client.payouts.create(
            reference=row_reference(LABEL, row),
            amount=amount,
            currency="GHS",
            provider="mtn",
            destination={"type": "msisdn", "value": "233241234567"},
        )


async def a_run_with_every_kind(emu: Emulator) -> list[IntendedPayout]:
    """Rows 2..20 approved: 19 sent an attempt earlier (outside the window: read by reference), 2..13
    delivered then changed by the platform, 14, 15 and 20 never sent, 16..18 still moving; chk-r999 and
    chk-r1000 sent outside payops with the run's reference pattern; another run's payout in the window."""
    await send(emu, range(19, 20))
    emu.clock.advance(3600)  # the earlier attempt, an hour before this one
    payouts = [intended(row) for row in range(2, 21)]
    await send(emu, range(2, 14))
    await emu.client.payouts.create(
        reference="other-r2",
        amount="5.00",
        currency="GHS",
        provider="mtn",
        destination={"type": "msisdn", "value": "233241234567"},
    )
    emu.clock.advance(5)  # delivered
    await admin(emu, "payouts/chk-r2/reconciliation", {"status": "mismatched"})
    await admin(emu, "payouts/chk-r3/adjust", {"fee": "19.99"})
    await admin(emu, "payouts/chk-r4/adjust", {"amount": "9.00"})
    await admin(emu, "payouts/chk-r5/reconciliation", {"status": "unchecked"})
    await admin(emu, "payouts/chk-r6/refund")
    await admin(emu, "movements", {"kind": "payout", "reference": "chk-r999", "amount": "25.00"})
    await admin(emu, "movements", {"kind": "payout", "reference": "chk-r1000", "amount": "3.00"})
    await send(emu, range(16, 19))  # accepted, not final yet
    return payouts


def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rr, "MATCH_CHUNK", 3)
    monkeypatch.setattr(rr, "READ_CHUNK", 2)
    monkeypatch.setattr(rr, "GET_CHUNK", 1)


async def test_chunked_reconcile_equals_one_chunk_for_every_kind(
    stores: list[ReconciliationStore], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = make_emulator()
    start = emu.clock.now() + timedelta(minutes=30)  # the earlier attempt (at `now`) is outside the window
    payouts = await a_run_with_every_kind(emu)
    store = stores[0]
    store.record_intent(LABEL, start, payouts)
    now = emu.clock.now()

    whole = await reconcile_run(emu.client, store, LABEL, "test", unchecked_after=timedelta(0), now=now)
    with monkeypatch.context() as m:
        small_chunks(m)
        chunked = await reconcile_run(
            emu.client, store, LABEL, "test", unchecked_after=timedelta(0), now=now, scratch_dir=tmp_path
        )
    assert list(tmp_path.glob("payops-run-match-*")) == []  # the match file is deleted after

    assert chunked.summary == whole.summary and chunked.differences == whole.differences
    assert whole.summary.by_kind == {
        "amount_different": 1,
        "fee_outside_bound": 1,
        "missing_at_service": 3,
        "not_sent_by_payops": 2,
        "platform_mismatched": 1,
        "reversed_after_delivery": 1,
        "unchecked_too_long": 1,
    }
    by_kind = [(d.kind, d.reference) for d in whole.differences]
    assert by_kind == [
        ("missing_at_service", "chk-r14"),
        ("missing_at_service", "chk-r15"),
        ("missing_at_service", "chk-r20"),
        ("not_sent_by_payops", "chk-r1000"),  # each kind in reference order (as text)
        ("not_sent_by_payops", "chk-r999"),
        ("amount_different", "chk-r4"),
        ("fee_outside_bound", "chk-r3"),
        ("platform_mismatched", "chk-r2"),
        ("unchecked_too_long", "chk-r5"),
        ("reversed_after_delivery", "chk-r6"),
    ]
    # 19 approved; 7..13, 19 (read by reference) and 16..18 (still moving, so open) match
    assert (whole.summary.rows, whole.summary.matched, whole.summary.open) == (19, 11, 3)
    assert whole.summary.status == "differences"
    fee = next(d for d in whole.differences if d.kind == "fee_outside_bound")
    assert (fee.expected, fee.actual) == ("0.00..1.00", "19.99")
    refund = next(d for d in whole.differences if d.kind == "reversed_after_delivery")
    # the detail names the reversal that carried the money back
    assert (refund.expected, refund.actual, refund.detail) == ("10.00", "refunded", "row 6: rvr-chk-r6")
    stored = store.checks("run", LABEL)
    assert [c.differences for c in stored] == [whole.differences, whole.differences]


@pytest.mark.parametrize("windows", ["one list", "time windows read at once"])
async def test_the_match_file_path_equals_match_run_on_the_same_records(
    stores: list[ReconciliationStore], monkeypatch: pytest.MonkeyPatch, windows: str
) -> None:
    """`match_run` (one frame, the records as models) and the chunked match of the same records agree,
    whether the run's payouts are read in one list or in time windows read at once (pages of 2 here, so
    the 19 approved payouts make 10 windows besides the margins)."""
    emu = make_emulator()
    start = emu.clock.now() + timedelta(minutes=30)
    payouts = await a_run_with_every_kind(emu)
    now = emu.clock.now()
    records = [tx async for tx in emu.client.transactions.iterate(kind="payout", limit=100)]
    records = [r for r in records if r.reference.startswith("chk-") and r.reference != "chk-r19"]
    records.append(await emu.client.payouts.get("chk-r19"))
    one = rr.match_run(LABEL, payouts, records, now, timedelta(0))

    store = stores[0]
    store.record_intent(LABEL, start, payouts)
    monkeypatch.setattr(rr, "MATCH_CHUNK", 2)
    with rr.new_match_file() as file:
        rr.copy_intended(store, LABEL, file)
        window = (start - rr.WINDOW_MARGIN, now + rr.WINDOW_MARGIN)
        sending = None
        if windows != "one list":
            monkeypatch.setattr(rr, "PAGE", 2)
            sending = (start, now)
            assert len(rr.list_windows(*window, sending, file.intended_count())) == 10 + 2
        await rr.fetch_run_records(emu.client, LABEL, file, *window, sending)
        chunked = rr.match_file(LABEL, file, now, timedelta(0))
    assert chunked == one
    assert one.records == 18  # 2..13, 16..19 and the two outside payops: no reversal, no other run's


async def test_a_run_recorded_in_parts_reconciles_as_one_recorded_at_once(
    stores: list[ReconciliationStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = make_emulator()
    start = emu.clock.now() + timedelta(minutes=30)
    payouts = await a_run_with_every_kind(emu)
    now = emu.clock.now()
    at_once, in_parts = stores
    at_once.record_intent(LABEL, start, payouts)
    in_parts.record_intent(LABEL, start - timedelta(days=1), payouts[:4])  # an earlier attempt of the label
    in_parts.record_intent(LABEL, start, payouts[10:12])  # this attempt's first part replaces it
    in_parts.record_intent(LABEL, start + timedelta(minutes=1), payouts[:10], first=False)
    in_parts.record_intent(LABEL, start + timedelta(minutes=2), payouts[12:], first=False)
    run = in_parts.run(LABEL)
    assert run is not None and run.rows == len(payouts) and run.sent_from == start

    small_chunks(monkeypatch)
    one = await reconcile_run(emu.client, at_once, LABEL, "test", unchecked_after=timedelta(0), now=now)
    parts = await reconcile_run(emu.client, in_parts, LABEL, "test", unchecked_after=timedelta(0), now=now)
    assert parts.summary == one.summary and parts.differences == one.differences
    assert parts.summary.rows == 19


def test_a_later_part_needs_a_first_and_a_reference_is_recorded_once(
    stores: list[ReconciliationStore],
) -> None:
    store = stores[0]
    start = rr.datetime(2026, 11, 22, 9, 0, tzinfo=rr.UTC)
    with pytest.raises(LookupError):
        store.record_intent(LABEL, start, [intended(2)], first=False)
    assert store.run(LABEL) is None and store.intended(LABEL) == []
    store.record_intent(LABEL, start, [intended(2), intended(3)])
    with pytest.raises(Exception, match="UNIQUE"):
        store.record_intent(LABEL, start, [intended(4), replace(intended(3), amount="1.00")], first=False)
    assert store.run(LABEL).rows == 2 and len(store.intended(LABEL)) == 2  # the failed part left nothing


async def test_reconcile_at_run_end_takes_the_refused_references_as_they_come(
    stores: list[ReconciliationStore],
) -> None:
    """`forget` reads an iterable of any length a chunk at a time (here a generator over 1,201 references)."""
    store = stores[0]
    start = rr.datetime(2026, 11, 22, 9, 0, tzinfo=rr.UTC)
    store.record_intent(LABEL, start, [intended(row) for row in range(2, 1500)])
    seen: list[str] = []

    def refused() -> Iterator[str]:
        for row in range(2, 1203):
            seen.append(row_reference(LABEL, row))
            yield row_reference(LABEL, row)

    store.forget(LABEL, refused())
    assert len(seen) == 1201 and store.run(LABEL).rows == 1498 - 1201
    assert [p.row for p in store.intended(LABEL)] == list(range(1203, 1500))

    class Outcome:
        def __init__(self, submission: str, reference: str | None) -> None:
            self.submission, self.reference = submission, reference

    outcomes = [Outcome("refused", "a"), Outcome("accepted", "b"), Outcome("refused", None)]
    assert list(rr.refused_references(outcomes)) == ["a"]


def test_list_windows_partition_the_read_span_and_split_the_sending_span_by_the_run_size() -> None:
    t0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    start, end = t0 - rr.WINDOW_MARGIN, t0 + timedelta(seconds=30) + rr.WINDOW_MARGIN
    sending = (t0, t0 + timedelta(seconds=30))
    for payouts, inner in [(0, 1), (1, 1), (100, 1), (101, 2), (2_000, 20), (1_000_000, 30)]:
        windows = rr.list_windows(start, end, sending, payouts)
        assert windows[0] == (start, t0) and windows[-1] == (sending[1], end)
        assert len(windows) == inner + 2
        assert all(a < b for a, b in windows)
        assert all(w[1] == nxt[0] for w, nxt in zip(windows, windows[1:], strict=False))  # no gap, no overlap
    assert rr.list_windows(start, end, None, 2_000) == [(start, end)]
    assert rr.list_windows(start, end, (t0, t0), 2_000) == [(start, end)]  # nothing sent: one list


def test_sent_span_spans_the_payouts_this_run_created_and_counts_replays() -> None:
    started = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    created = rr.SentSpan(started)
    assert created.span is None
    for at in [
        started + timedelta(seconds=2),
        None,
        started - timedelta(hours=1),
        started + timedelta(seconds=1),
    ]:
        created.add(at)
    assert created.replayed == 1  # created before the run started: an earlier run sent it
    assert created.span == (started + timedelta(seconds=1), started + timedelta(seconds=2, milliseconds=1))
