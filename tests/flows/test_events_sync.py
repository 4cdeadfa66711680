"""`events-catch-up` against the emulator: each event emitted once across crashes, and the 400 restart."""

from __future__ import annotations

import asyncio
import importlib
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.flows.events import EventsCatchUpParams, events_catch_up
from payops.sandbox import ManualClock, SandboxConfig, SandboxServer
from payops.tasks.events import events_sync
from payops.tasks.events.payment_events import envelope_to_event

pytestmark = pytest.mark.e2e

SELF = "tests.flows.test_events_sync"
RECORDED: list[dict[str, Any]] = []
FAIL_AFTER: list[int] = []  # [n]: the emitter raises on its (n+1)-th call


def record(**kwargs: Any) -> None:
    """Injectable emitter: keeps every event it is given."""
    RECORDED.append(kwargs)


def flaky(**kwargs: Any) -> None:
    """Injectable emitter that crashes once after `FAIL_AFTER[0]` events."""
    if FAIL_AFTER and len(RECORDED) >= FAIL_AFTER[0]:
        FAIL_AFTER.clear()
        raise RuntimeError("emitter crashed")
    RECORDED.append(kwargs)


def recorded() -> list[dict[str, Any]]:
    """The list the emitters fill (the module imported by path, as the flow imports it)."""
    return importlib.import_module(SELF).RECORDED


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def server(clock: ManualClock) -> Iterator[SandboxServer]:
    config = SandboxConfig(clock=clock, events_lag_s=0, allow_local_webhooks=True, webhook_worker=False)
    with SandboxServer(config) as s:
        r = httpx.post(
            f"{s.base_url}/_sandbox/businesses/demo/test/webhook-endpoints",
            json={"url": "http://127.0.0.1:9/hook"},
            timeout=10,
        )
        assert r.status_code == 201, r.text
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    # each test reads the whole shared feed with its own cursor: give it its own webhook inbox (seen ids)
    monkeypatch.setenv("PAYOPS_DATABASE_URL", f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    recorded().clear()
    return server


async def _payouts(n: int, prefix: str) -> None:
    async with PaymentsClient(PaymentsSettings()) as client:
        for i in range(n):
            await client.payouts.create(
                reference=f"{prefix}-{i}",
                amount=Decimal("5.00"),
                currency="GHS",
                provider="mtn",
                destination={"type": "msisdn", "value": f"23324{i:07d}"},
            )


def feed_ids(server: SandboxServer) -> list[str]:
    return [e.id for e in server.state.envs[("demo", "test")].events]


def run(**fields: Any) -> dict[str, Any]:
    return asyncio.run(events_catch_up(EventsCatchUpParams(emitter=f"{SELF}:record", **fields)))


def assert_each_once(server: SandboxServer) -> None:
    ids = [e["payload"]["eventId"] for e in recorded()]
    assert Counter(ids).most_common(1)[0][1] == 1, "an event was emitted twice"
    assert ids == feed_ids(server), "an event was lost or emitted out of order"


def test_emitter_crash_midway_resumes_without_loss_or_duplicate(prefect_harness, env, clock) -> None:
    asyncio.run(_payouts(7, "crash-emit"))
    clock.advance(5)  # each payout: accepted, dispatching, delivered → 21 events
    FAIL_AFTER[:] = [9]
    params = EventsCatchUpParams(variable="evtest-emitter-crash", page_size=4, emitter=f"{SELF}:flaky")
    with pytest.raises(RuntimeError, match="emitter crashed"):
        asyncio.run(events_catch_up(params))
    assert len(recorded()) == 9
    s = run(variable="evtest-emitter-crash", page_size=4)
    assert s["outcome"] == "completed" and s["cursor_before"] == feed_ids(env)[7]  # last full page saved
    assert s["duplicates_skipped"] == 1 and s["events_emitted"] == len(feed_ids(env)) - 9
    assert_each_once(env)
    again = run(variable="evtest-emitter-crash", page_size=4)
    assert again["events_emitted"] == 0 and again["cursor_after"] == feed_ids(env)[-1]
    assert_each_once(env)


def test_kill_between_processing_and_cursor_save_emits_nothing_twice(
    prefect_harness, env, clock, monkeypatch
) -> None:
    asyncio.run(_payouts(4, "kill"))
    clock.advance(5)
    saves: list[str | None] = []
    original = events_sync.VariableCursorStore.save_cursor

    async def dies_on_second_save(self, after: str | None) -> None:
        saves.append(after)
        if len(saves) == 2:
            raise RuntimeError("killed before the cursor was saved")  # not a transient error: no retry
        await original(self, after)

    monkeypatch.setattr(events_sync.VariableCursorStore, "save_cursor", dies_on_second_save)
    with pytest.raises(RuntimeError, match="killed"):
        run(variable="evtest-kill", page_size=5)
    assert len(recorded()) == 10  # two pages processed, the second one's cursor never saved
    monkeypatch.setattr(events_sync.VariableCursorStore, "save_cursor", original)
    s = run(variable="evtest-kill", page_size=5)
    assert s["cursor_before"] == feed_ids(env)[4] and s["duplicates_skipped"] == 5
    assert_each_once(env)


def test_cursor_too_old_restarts_from_the_first_event_without_re_emitting(
    prefect_harness, env, clock
) -> None:
    from prefect.variables import Variable

    first = run(variable="evtest-old")
    assert first["restarted_without_cursor"] is False and first["cursor_after"] == feed_ids(env)[-1]
    asyncio.run(_payouts(2, "after-restart"))
    clock.advance(5)
    Variable.set("evtest-old", "evt_expired00000000000000000000000000", overwrite=True)  # unknown to the feed
    s = run(variable="evtest-old")
    assert s["restarted_without_cursor"] is True and s["outcome"] == "completed"
    assert s["events_emitted"] == 6 and s["duplicates_skipped"] == len(feed_ids(env)) - 6
    assert s["cursor_after"] == feed_ids(env)[-1]
    assert_each_once(env)
    assert s["emitted_by_type"] == {"payout.accepted": 2, "payout.status_changed": 4}


def test_conversion_is_the_one_shared_with_the_settlement_relay() -> None:
    from payops.tasks.settlements import settlement_event

    envelope = {
        "id": "evt_1",
        "type": "utility_purchase.status_changed",
        "createdAt": "2026-01-10T10:00:00Z",
        "data": {"reference": "u-1", "status": "delivered"},
    }
    e = envelope_to_event(envelope)
    assert e["event"] == "payments.utility_purchase.status_changed"
    assert e["resource"]["prefect.resource.id"] == "payments.utility_purchase.u-1"
    assert e["resource"]["payments.status"] == "delivered" and e["payload"]["eventId"] == "evt_1"
    assert e["id"] == envelope_to_event(envelope)["id"]
    settlement = {**envelope, "type": "settlement.status_changed"}
    assert settlement_event(settlement) == envelope_to_event(settlement)
