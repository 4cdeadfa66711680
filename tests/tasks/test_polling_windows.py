"""Which slices of the transaction list a polling round reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from payops.tasks.payouts.polling import PayoutState, pending_windows

T0 = datetime(2026, 11, 22, 8, 0, 0, 123000, tzinfo=UTC)


def _batch(states: dict[str, PayoutState], index: int, size: int, status: str, at: datetime) -> None:
    for i in range(size):
        ref = f"b{index}-{i}"
        states[ref] = PayoutState(ref, status, created_at=at)


def test_one_window_per_pending_batch_and_none_for_final_ones() -> None:
    states: dict[str, PayoutState] = {}
    _batch(states, 0, 100, "delivered", T0)
    _batch(states, 1, 100, "accepted", T0 + timedelta(seconds=1))
    _batch(states, 2, 100, "dispatching", T0 + timedelta(seconds=2))
    _batch(states, 3, 100, "failed", T0 + timedelta(seconds=3))
    windows = pending_windows(states)
    assert [(w.start, w.end) for w in windows] == [
        (T0 + timedelta(seconds=1), T0 + timedelta(seconds=1, milliseconds=1)),
        (T0 + timedelta(seconds=2), T0 + timedelta(seconds=2, milliseconds=1)),
    ]
    assert windows[0].references == {f"b1-{i}" for i in range(100)}


def test_small_neighbouring_batches_share_a_window_of_at_most_a_page() -> None:
    states: dict[str, PayoutState] = {}
    for b in range(5):
        _batch(states, b, 30, "accepted", T0 + timedelta(milliseconds=10 * b))
    windows = pending_windows(states)
    assert [len(w.references) for w in windows] == [90, 60]
    assert windows[0].start == T0 and windows[0].end == T0 + timedelta(milliseconds=21)
    assert windows[1].start == T0 + timedelta(milliseconds=30)


def test_a_final_batch_in_between_splits_the_window() -> None:
    states: dict[str, PayoutState] = {}
    _batch(states, 0, 10, "accepted", T0)
    _batch(states, 1, 10, "delivered", T0 + timedelta(milliseconds=5))
    _batch(states, 2, 10, "held", T0 + timedelta(milliseconds=9))
    assert [sorted(w.references)[0] for w in pending_windows(states)] == ["b0-0", "b2-0"]


def test_whole_second_timestamps_get_a_one_second_end() -> None:
    at = T0.replace(microsecond=0)
    states: dict[str, PayoutState] = {}
    _batch(states, 0, 3, "accepted", at)
    assert [(w.start, w.end) for w in pending_windows(states)] == [(at, at + timedelta(seconds=1))]


def test_payouts_without_a_creation_time_are_left_to_reads_by_reference() -> None:
    states = {"x": PayoutState("x", "accepted")}
    assert pending_windows(states) == []
