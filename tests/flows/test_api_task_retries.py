"""The one retry policy of API tasks, counted at the emulator under its faults: a batch POST goes out at most
the client's retry budget, a refused batch once, and a poll stops at its deadline (no restart)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from payops.connectors.payments import InternalServerError, PaymentsSettings
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.payouts.batching import build_batch
from payops.tasks.payouts.polling import PayoutState, poll_payouts_task
from payops.tasks.payouts.submission import BatchRefused, submit_batch_task
from payops.tasks.rows.payout_row import PayoutRow
from prefect import flow

from tests.flows.support import emulator_stats

pytestmark = pytest.mark.e2e
MAX_RETRIES = 2


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3, fault_seed=7)) as s:
        yield s


@pytest.fixture
def settings(server: SandboxServer) -> Iterator[PaymentsSettings]:
    env = {k.removeprefix("PAYOPS_").lower(): v for k, v in server.env.items()}
    yield PaymentsSettings(**env, max_retries=MAX_RETRIES, backoff_base_s=0.01, backoff_max_s=0.05)
    server.sandbox.faults.rate = 0.0


def _rows(prefix: str, amount: str = "10.00") -> list[PayoutRow]:
    return [
        PayoutRow(
            row=2 + i,
            reference=f"{prefix}-{i}",
            amount=Decimal(amount),
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination=f"23324555{i:04d}",
        )
        for i in range(3)
    ]


def _count(server: SandboxServer, endpoint: str) -> int:
    return emulator_stats(server.base_url)["requests"].get(endpoint, 0)


@flow
async def _submit(settings: PaymentsSettings, label: str, rows: list[PayoutRow]):
    return await submit_batch_task(settings, build_batch(rows, label, 0), 100.0)


@flow
async def _poll(settings: PaymentsSettings, states: dict[str, PayoutState], deadline_at: float):
    return await poll_payouts_task(settings, states, deadline_at, 100.0, "retry-policy-poll", None)


def test_a_failing_batch_post_goes_out_at_most_the_clients_retry_budget(
    prefect_harness, server: SandboxServer, settings: PaymentsSettings
) -> None:
    before = _count(server, "POST /v1/payout-batches")
    server.sandbox.faults.rate = 1.0  # every /v1 request answered 5xx
    with pytest.raises(InternalServerError):
        asyncio.run(_submit(settings, "budget-run", _rows("BUD")))
    assert _count(server, "POST /v1/payout-batches") - before == MAX_RETRIES + 1


def test_a_refused_batch_is_sent_once(
    prefect_harness, server: SandboxServer, settings: PaymentsSettings
) -> None:
    asyncio.run(_submit(settings, "refused-run", _rows("REF")))
    before = _count(server, "POST /v1/payout-batches")
    # The same label (so the same batch reference) with other content: the service refuses the whole batch.
    with pytest.raises(BatchRefused):
        asyncio.run(_submit(settings, "refused-run", _rows("REF", amount="11.00")))
    assert _count(server, "POST /v1/payout-batches") - before == 1


def test_a_poll_under_faults_stops_at_its_deadline(
    prefect_harness, server: SandboxServer, settings: PaymentsSettings
) -> None:
    states = {"POLL-1": PayoutState("POLL-1", "accepted")}
    server.sandbox.faults.rate = 1.0
    started = time.monotonic()
    result = asyncio.run(_poll(settings, states, time.time() + 3))
    elapsed = time.monotonic() - started
    assert result.deadline_reached and result.failed_rounds == result.rounds >= 2
    assert 3 <= elapsed < 8, elapsed  # one deadline, never restarted by a task retry
    gets = emulator_stats(server.base_url)["requests"].get("GET /v1/payouts/POLL-1", 0)
    assert gets == result.rounds * (MAX_RETRIES + 1)
