"""A run's adaptive rate starts where the last run against the same service and credential left it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from payops.connectors.payments import PaymentsSettings
from payops.tasks.runtime import clients
from payops.tasks.runtime.ratelimit import START_PER_S, AdaptiveRate, adaptive_rate
from payops.tasks.runtime.service_pace import KEEP_FOR_S, PACE_FILE, Pace, pace_key, remember, remembered


def test_a_pace_learned_without_429s_only_rises_and_one_set_by_429s_replaces_it(tmp_path: Path) -> None:
    key = pace_key("https://api.example", "client-1")
    assert remembered(key, home=tmp_path) is None
    remember(key, Pace(300.0, limited=False), home=tmp_path, now=1000.0)
    remember(key, Pace(120.0, limited=False), home=tmp_path, now=1001.0)  # a small run needed less
    assert remembered(key, home=tmp_path, now=1002.0) == Pace(300.0, limited=False)
    remember(key, Pace(90.0, limited=True), home=tmp_path, now=1003.0)  # the service said 429 at 90/s
    assert remembered(key, home=tmp_path, now=1004.0) == Pace(90.0, limited=True)
    remember(key, Pace(60.0, limited=False), home=tmp_path, now=1005.0)
    assert remembered(key, home=tmp_path, now=1006.0) == Pace(90.0, limited=True)
    other = pace_key("https://api.example", "client-2")
    assert remembered(other, home=tmp_path, now=1006.0) is None  # another credential learns for itself
    assert remembered(key, home=tmp_path, now=1005.0 + KEEP_FOR_S + 1) is None  # a day on: forgotten
    text = (tmp_path / PACE_FILE).read_text()
    assert "client-1" not in text and "api.example" not in text


def test_a_damaged_pace_file_starts_from_the_default(tmp_path: Path) -> None:
    key = pace_key("https://api.example", "c")
    (tmp_path / PACE_FILE).write_text("{not json")
    assert remembered(key, home=tmp_path) is None
    remember(key, Pace(200.0, limited=False), home=tmp_path)
    assert remembered(key, home=tmp_path) == Pace(200.0, limited=False)
    (tmp_path / PACE_FILE).write_text(json.dumps({key: {"per_s": "fast"}}))
    assert remembered(key, home=tmp_path) is None


def test_what_a_rate_learned_is_its_highest_driven_rate_or_its_rate_after_a_429() -> None:
    now = [0.0]
    rate = AdaptiveRate(1000, clock=lambda: now[0])
    assert rate.learned is None  # never driven: nothing learned
    rate._saturated = True
    now[0] = 0.3
    rate.observe(200, None, 0.1)
    assert rate.rate > START_PER_S and rate.learned == Pace(rate.rate, limited=False)
    rate.observe(429, 1.0, None)
    assert rate.learned == Pace(rate.rate, limited=True)


def test_a_remembered_pace_starts_the_rate_there_and_a_limited_one_without_slow_start() -> None:
    fresh = adaptive_rate(1000, None)
    assert (fresh.rate, fresh.slow_start) == (START_PER_S, True)
    warm = adaptive_rate(1000, Pace(320.0, limited=False))
    assert (warm.rate, warm.slow_start) == (320.0, True)
    assert warm.start_burst == START_PER_S  # no storm of a second at the remembered rate
    limited = adaptive_rate(1000, Pace(20.0, limited=True))
    assert (limited.rate, limited.slow_start) == (20.0, False)
    assert adaptive_rate(100, Pace(320.0, limited=False)).rate == 100  # never above the run's ceiling


def test_a_second_run_against_the_same_service_starts_at_the_pace_the_first_reached(
    tmp_path: Path,
) -> None:
    """Two flows' client pools in one payops home, each on an event loop of its own as two runs' processes
    have: the first drives its rate up against a service that keeps up, the second starts there; a pool
    without a home (a task called outside a flow) starts afresh."""

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.01)
        return httpx.Response(200, json={"ok": True})

    settings = PaymentsSettings(base_url="https://api.example", client_id="c", client_secret="s")

    async def one_run(requests: int, home: Path | None = tmp_path) -> AdaptiveRate:
        pool = clients.ClientPool(home)
        _client, transport = await pool.get(settings, 1000.0)
        transport.inner = httpx.MockTransport(answer)
        request = httpx.Request("GET", "https://api.example/v1/x", headers={"Authorization": "Bearer t"})
        gate = asyncio.Semaphore(64)

        async def send() -> None:
            async with gate:
                await transport.handle_async_request(request)

        await asyncio.gather(*(send() for _ in range(requests)))
        limiter = transport.limiter
        await pool.aclose()
        assert isinstance(limiter, AdaptiveRate)
        return limiter

    first = asyncio.run(one_run(600))
    assert first.started_at == START_PER_S and first.rate_max > 2 * START_PER_S
    second = asyncio.run(one_run(10))
    assert second.started_at == pytest.approx(first.rate_max, rel=0.01)
    assert asyncio.run(one_run(10, home=None)).started_at == START_PER_S


def test_every_flow_opens_its_clients_with_its_home() -> None:
    """A flow that opened its clients without its settings would start every run from the default rate."""
    flows = Path(__file__).resolve().parents[2] / "flows"
    bare = [p.name for p in flows.glob("*.py") if "open_clients()" in p.read_text()]
    opened = [p.name for p in flows.glob("*.py") if "open_clients(" in p.read_text()]
    assert bare == [] and len(opened) >= 8, (bare, opened)
