"""Settlement tasks: references, selection, retry once, polling, Prefect events (against the emulator)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml
from payops.connectors.payments import PaymentsClient, PaymentsSettings, WebhookEnvelope
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks import settlements as ts
from payops.tasks.payouts.poll_loop import Backoff
from payops.tasks.settlements import RunInfo
from payops.tasks.wire import references as refs

REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
BAD = "1400000009991"  # contract.md: a settlement destination ending 9991 fails
GOOD = ("1400000000011", "1400000000012")
RESETTLE = "POST /v1/settlements/{id}/resettlements"
POLICIES = {"failed_partial": [BAD, GOOD[0]], "failed_all": [BAD], "settled": [GOOD[0], GOOD[1]]}


# ------------------------------------------------------------------------------------------------
# Emulator helpers (also used by tests/flows/test_settlements.py)
# ------------------------------------------------------------------------------------------------


def policy(accounts: Sequence[str], minimum: str = "9000000.00") -> dict[str, Any]:
    """A manual policy paying bank accounts at calbank in equal shares."""
    share = 100 // len(accounts)
    shares = [100 - share * (len(accounts) - 1)] + [share] * (len(accounts) - 1)
    return {
        "schedule": "manual",
        "currency": "GHS",
        "minimum_balance": minimum,
        "destinations": [
            {
                "type": "bank",
                "provider": "calbank",
                "account_number": a,
                "account_name": "Demo",
                "share": str(s),
            }
            for a, s in zip(accounts, shares, strict=True)
        ],
    }


def settings_for(server: SandboxServer) -> PaymentsSettings:
    return PaymentsSettings(
        base_url=server.base_url,
        auth_url=server.auth_url,
        client_id="demo-test-client",
        client_secret="demo-test-secret",
        backoff_base_s=0.05,
        backoff_max_s=1.0,
    )


def admin(server: SandboxServer, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.request(
        method, f"{server.base_url}/_sandbox/businesses/demo/test{path}", json=body, timeout=10
    )
    response.raise_for_status()
    return response.json()


def resettle_requests(server: SandboxServer) -> int:
    return httpx.get(f"{server.base_url}/_sandbox/stats", timeout=10).json()["requests"].get(RESETTLE, 0)


async def wait_completed(client: PaymentsClient, run_id: str, timeout: float = 10) -> RunInfo:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        run = RunInfo.of(await client.settlements.get(run_id))
        if run.completed:
            return run
        assert asyncio.get_running_loop().time() < deadline, f"run {run_id} still {run.status}"
        await asyncio.sleep(0.1)


async def seed_runs(server: SandboxServer, outcomes: Sequence[str], then: str = "settled") -> dict[str, str]:
    """One completed run per outcome (in order); then leave the policy `then` (settled: good, else bad)."""
    ids: dict[str, str] = {}
    async with PaymentsClient(settings_for(server)) as client:
        for n, outcome in enumerate(outcomes):
            admin(server, "POST", "/wallet/fund", {"amount": "1000000.00"})
            await client.settlement_policy.put(**policy(POLICIES[outcome]))
            run = await client.settlements.settle_now(
                reference=f"seed-{n}-{outcome}".replace("_", "-"), idempotency_key=f"seed-{n}-{outcome}"
            )
            done = await wait_completed(client, run.id)
            assert done.outcome == outcome, done
            ids[outcome] = run.id
        await client.settlement_policy.put(**policy(POLICIES[then]))
    return ids


@pytest.fixture
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(settlement_delay_s=0.2)) as s:
        yield s


def run_info(
    run_id: str = "r1",
    reference: str = "ref-1",
    status: str = "completed",
    outcome: str | None = "settled",
    minutes_ago: int = 0,
) -> RunInfo:
    at = datetime(2026, 1, 10, tzinfo=UTC) - timedelta(minutes=minutes_ago)
    return RunInfo(run_id, reference, status, outcome, 1, Decimal("10.00"), "GHS", at, at)


# ------------------------------------------------------------------------------------------------
# Pure functions
# ------------------------------------------------------------------------------------------------


def test_retry_reference_and_key_are_stable_and_fit_the_reference_pattern() -> None:
    uuid_id = "5bf50e74-c8b9-4691-958c-eeb3ee37ca47"
    ref = refs.resettlement_reference(uuid_id)
    assert ref == "payops-rs-5bf50e74c8b94691958ceeb3ee37ca47" == refs.resettlement_reference(uuid_id)
    assert refs.resettlement_idempotency_key(uuid_id) == f"payops-resettle:{uuid_id}"
    for odd in ["x" * 200, "id with spaces/and:colons", "-leading", "ä"]:
        r = refs.resettlement_reference(odd)
        assert REFERENCE.match(r) and r == refs.resettlement_reference(odd) and refs.is_our_retry(r)
    assert refs.resettlement_reference("a" * 200) != refs.resettlement_reference("a" * 201)
    assert REFERENCE.match(refs.settle_now_reference("0b7c2f1e-1111-4222-8333-444455556666"))
    assert not refs.is_our_retry("stl-20260110-abc") and not refs.is_our_retry(None)


def test_selection_retries_only_failed_originals_and_sees_earlier_retries() -> None:
    partial = run_info("p", "stl-p", outcome="failed_partial", minutes_ago=30)
    failed_all = run_info("a", "stl-a", outcome="failed_all", minutes_ago=20)
    settled = run_info("s", "stl-s", outcome="settled", minutes_ago=10)
    running = run_info("r", "stl-r", status="running", outcome=None)
    retry_of_a = run_info("ra", refs.resettlement_reference("a"), outcome="settled", minutes_ago=5)
    own_failed = run_info("rx", refs.resettlement_reference("x"), outcome="failed_all", minutes_ago=1)
    candidates, done = ts.select_runs([own_failed, retry_of_a, running, settled, failed_all, partial])
    assert [r.id for r in candidates] == ["p"]
    assert [(d.run.id, d.action, d.retry.id) for d in done] == [("a", "retried_before", "ra")]
    action, reason = ts.run_row_action(own_failed, {}, {})
    assert action == "own_retry" and "not retried again" in reason
    assert ts.run_row_action(settled, {}, {}) == ("not_eligible", "outcome settled")
    assert ts.run_row_action(running, {}, {}) == ("not_eligible", "status running")


async def test_polling_grows_its_interval_and_stops_at_the_deadline(server: SandboxServer) -> None:
    ids = await seed_runs(server, ["failed_all"])
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    async with PaymentsClient(settings_for(server)) as client:
        run = RunInfo.of(await client.settlements.get(ids["failed_all"]))
        run.status = "running"  # pretend it is still running: the first read completes it
        result = await ts.poll_until_completed(client, {run.id: run}, deadline_s=5, sleep=fake_sleep)
        assert result.runs[run.id].completed and result.rounds == 1 and not result.deadline_reached
        server.state.settlement_delay_s = 3600
        new = RunInfo.of(
            await client.settlements.resettle(run.id, reference="manual-1", idempotency_key="m1")
        )
        result = await ts.poll_until_completed(
            client, {new.id: new}, deadline_s=0.6, backoff=Backoff(0.05, 0.2, wait_first=True)
        )
        assert result.deadline_reached and not result.runs[new.id].completed and result.rounds >= 3
    assert waits[0] == 0.25
    result = await ts.poll_until_completed(None, {}, deadline_s=1)  # type: ignore[arg-type]
    assert result.rounds == 0


# ------------------------------------------------------------------------------------------------
# Against the emulator
# ------------------------------------------------------------------------------------------------


async def test_resettle_starts_one_retry_and_classifies_the_409s(server: SandboxServer) -> None:
    ids = await seed_runs(server, ["failed_partial", "settled", "failed_all"])
    async with PaymentsClient(settings_for(server)) as client:
        since = datetime.now(UTC) - timedelta(days=7)
        runs = await ts.list_runs_since(client, since, page_size=1)  # paging with one run per page
        assert [r.id for r in runs] == [ids["failed_all"], ids["settled"], ids["failed_partial"]]
        assert await ts.list_runs_since(client, datetime.now(UTC) + timedelta(hours=1)) == []

        candidates, _ = ts.select_runs(runs)
        first = await ts.resettle(client, candidates[0])
        assert first.action == "retried" and first.retry.reference == refs.resettlement_reference(
            ids["failed_all"]
        )
        again = await ts.resettle(client, candidates[0])  # same key and body: the first answer, no new run
        assert again.action == "retried" and again.retry.id == first.retry.id

        settled = next(r for r in runs if r.id == ids["settled"])
        skipped = await ts.resettle(client, settled)
        assert skipped.action == "skipped" and skipped.code == "resettlement_not_allowed" and skipped.reason

        # Someone else retried the partial run under another reference: 409, reported as retried before.
        await client.settlements.resettle(ids["failed_partial"], reference="by-hand-1", idempotency_key="h1")
        partial = next(r for r in runs if r.id == ids["failed_partial"])
        before = await ts.resettle(client, partial)
        assert before.action == "retried_before" and before.code == "settlement_already_retried"
        assert before.retry is None and "not by this flow" in before.reason

        found = await ts.find_run_by_reference(client, first.retry.reference, since, page_size=1)
        assert found is not None and found.id == first.retry.id
        assert await ts.find_run_by_reference(client, "nope", since) is None
    assert resettle_requests(server) == 5  # first, replay, settled, by hand, already retried
    assert len(server.state.envs[("demo", "test")].settlement_runs) == 5  # 3 seeded + 2 retries


async def test_policy_alert_stops_after_one_request(server: SandboxServer) -> None:
    ids = await seed_runs(server, ["failed_partial", "failed_all"])
    admin(server, "PATCH", "", {"providers": ["mtn", "telecel", "gcb"]})  # calbank gone: policy unpayable
    async with PaymentsClient(settings_for(server)) as client:
        runs = await ts.list_runs_since(client, datetime.now(UTC) - timedelta(days=1))
        candidates, _ = ts.select_runs(runs)
        results = await ts.resettle_all(client, candidates)
    assert [r.action for r in results] == ["alert", "not_attempted"]
    assert results[0].code == "policy_missing_provider" and ts.POLICY_FIX in results[0].reason
    assert {r.run.id for r in results} == set(ids.values())
    assert resettle_requests(server) == 1


# ------------------------------------------------------------------------------------------------
# Prefect events
# ------------------------------------------------------------------------------------------------


def _envelope(
    outcome: str | None, reference: str = "stl-20260110-ab12", event_id: str = "evt_1"
) -> dict[str, Any]:
    data = {
        "reference": reference,
        "status": "completed" if outcome else "running",
        "itemCount": 2,
        "total": "10.00",
        "currency": "GHS",
        "startedAt": "2026-01-10T00:00:00.000Z",
    }
    if outcome:
        data["outcome"] = outcome
    return {
        "id": event_id,
        "type": "settlement.status_changed",
        "createdAt": "2026-01-10T00:00:01.000Z",
        "data": data,
    }


def _documented_trigger() -> Any:
    """The trigger snippet of the module docstring, parsed as prefect.yaml would be."""
    from prefect.events import DeploymentEventTrigger

    snippet = ts.__doc__.split("(prefect.yaml)::", 1)[1].split("\n\n", 2)[1]
    spec = yaml.safe_load(snippet)["triggers"][0]
    assert spec.pop("type") == "event"
    return DeploymentEventTrigger(**spec)


def test_envelope_becomes_a_prefect_event_the_documented_trigger_reacts_to() -> None:
    from prefect.events import Event

    trigger = _documented_trigger()
    kwargs = ts.settlement_event(_envelope("failed_partial"))
    assert kwargs is not None and kwargs["event"] == "payments.settlement.status_changed"
    assert kwargs["resource"]["prefect.resource.id"] == "payments.settlement.stl-20260110-ab12"
    assert kwargs["payload"]["reference"] == "stl-20260110-ab12" and kwargs["payload"]["eventId"] == "evt_1"
    assert (
        kwargs["id"] == ts.settlement_event(_envelope("failed_partial"))["id"]
    )  # duplicate delivery: same id
    assert trigger.parameters == {"params": {"run_reference": "{{ event.payload.reference | string }}"}}

    def reacts(envelope: dict[str, Any]) -> bool:
        k = ts.settlement_event(envelope)
        event = Event(event=k["event"], resource=k["resource"], payload=k["payload"], id=k["id"])
        return event.event in trigger.expect and trigger.match.matches(event.resource)

    assert reacts(_envelope("failed_partial")) and reacts(_envelope("failed_all"))
    assert not reacts(_envelope("settled")) and not reacts(_envelope(None))
    assert (
        ts.settlement_event({"id": "e", "type": "payout.status_changed", "data": {"reference": "p"}}) is None
    )

    # The webhook receiver's converter gives the same event id and labels: one trigger serves both paths.
    from payops.deployments.console.webhooks import prefect_event

    theirs = prefect_event(WebhookEnvelope.model_validate(_envelope("failed_all")))
    ours = ts.settlement_event(_envelope("failed_all"))
    assert theirs["id"] == ours["id"] and theirs["event"] == ours["event"]
    assert theirs["resource"] == ours["resource"]


class _Feed:
    """`client.events` over the emulator's recorded events (its GET /v1/events route does not exist yet)."""

    def __init__(self, server: SandboxServer) -> None:
        self.envelopes = [
            WebhookEnvelope.model_validate(e.to_wire()) for e in server.state.envs[("demo", "test")].events
        ]

    async def iterate(self, *, after: str | None = None) -> AsyncIterator[WebhookEnvelope]:
        ids = [e.id for e in self.envelopes]
        for envelope in self.envelopes[ids.index(after) + 1 if after else 0 :]:
            yield envelope


async def test_events_feed_is_relayed_to_prefect_events(server: SandboxServer, monkeypatch) -> None:
    await seed_runs(server, ["failed_all"])
    emitted: list[dict[str, Any]] = []
    monkeypatch.setattr("prefect.events.emit_event", lambda **kw: emitted.append(kw) or kw)
    client = SimpleNamespace(events=_Feed(server))
    count, last = await ts.relay_settlement_events(client)  # type: ignore[arg-type]
    again, last2 = await ts.relay_settlement_events(client, after=last)  # type: ignore[arg-type]
    assert count == 2 and again == 0 and last2 == last  # start and finish of the run; nothing new after
    assert [e["resource"].get("payments.outcome") for e in emitted] == [None, "failed_all"]
    assert all(
        e["resource"]["prefect.resource.id"] == "payments.settlement.seed-0-failed-all" for e in emitted
    )
