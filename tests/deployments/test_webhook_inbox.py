"""The durable webhook inbox: nothing answered 2xx is lost, each selected event reaches Prefect once.

Covers the forward filter, backpressure (503 + Retry-After), an event Prefect lost being sent again, a
redelivery of an accepted but unforwarded id, two receivers sharing one PostgreSQL inbox, and a receiver
SIGKILLed right after answering while Prefect is down (a real console process and a real Prefect server).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from payops.deployments.console import ConsoleSettings, LocalLauncher, create_app
from payops.store import migrate, open_engine
from payops.store.webhook_inbox import WebhookInbox
from payops.tasks.events.event_relay import Relay
from payops.tasks.events.payment_events import EVENT_NAMESPACE, ForwardFilter
from pydantic import ValidationError

from tests.deployments.console_harness import free_port
from tests.deployments.test_webhook_receiver import NEW, OLD, delivery, settings_for, wait_for

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    """A thread-safe emitter shared by several apps; ``down`` makes it raise like an unreachable Prefect."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.down = False
        self._lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> None:
        if self.down:
            raise ConnectionError("Prefect is down")
        with self._lock:
            self.events.append(kwargs)

    def ids(self) -> Counter[str]:
        return Counter(e["resource"]["payments.webhook-id"] for e in self.events)


def app_client(settings: ConsoleSettings, recorder: Recorder) -> TestClient:
    return TestClient(create_app(settings, launcher=LocalLauncher(), emitter=recorder))


def post(client: TestClient | httpx.Client, event_id: str, **kw: Any) -> httpx.Response:
    body, headers = delivery(event_id, **kw)
    return client.post("/webhooks/payments", content=body, headers=headers)


def payout(status: str) -> dict[str, Any]:
    return {"event_type": "payout.status_changed", "data": {"reference": f"P-{status}", "status": status}}


# -- the forward filter ------------------------------------------------------------------------------------
def test_default_filter_forwards_what_drives_work() -> None:
    keep = ForwardFilter()

    def env(t: str, status: str | None = None) -> dict[str, Any]:
        return {"id": "e", "type": t, "data": {"status": status} if status else {}}

    for t in ["settlement.status_changed", "collection.accepted", "utility_purchase.status_changed"]:
        assert keep(env(t, "whatever"))
    assert keep(env("transfer.received"))
    for status in ["failed", "refunded", "held"]:
        assert keep(env("payout.status_changed", status))
    for status in ["delivered", "pending", "processing"]:
        assert not keep(env("payout.status_changed", status))
    assert not keep(env("payout.accepted"))
    assert not keep(env("webhook.test"))
    assert ForwardFilter("*")(env("payout.accepted"))
    assert ForwardFilter("payout.status_changed:delivered")(env("payout.status_changed", "delivered"))


@pytest.mark.parametrize("rules", ["", "payout.*:", ":failed", " , "])
def test_a_bad_forward_setting_is_refused_naming_the_field(tmp_path: Path, rules: str) -> None:
    with pytest.raises(ValidationError, match="webhook_forward"):
        settings_for(tmp_path, webhook_forward=rules)


def test_unselected_events_are_kept_for_audit_but_not_forwarded(tmp_path: Path) -> None:
    recorder = Recorder()
    with app_client(settings_for(tmp_path), recorder) as client:
        for i, status in enumerate(["delivered", "failed", "processing", "refunded"]):
            assert post(client, f"evt_f{i}", **payout(status)).json()["status"] == "accepted"
        assert post(client, "evt_f4").json()["status"] == "accepted"  # a settlement
        inbox: WebhookInbox = client.app.state.webhooks.inbox
        wait_for(lambda: len(recorder.events) == 3 and inbox.backlog() == 0)
        status = inbox.status()
    assert sorted(recorder.ids()) == ["evt_f1", "evt_f3", "evt_f4"]
    assert (status.total, status.forwarded, status.kept_only, status.backlog) == (5, 3, 2, 0)


def test_forward_everything_when_configured(tmp_path: Path) -> None:
    recorder = Recorder()
    with app_client(settings_for(tmp_path, webhook_forward="*"), recorder) as client:
        assert post(client, "evt_all", **payout("delivered")).status_code == 200
        wait_for(lambda: list(recorder.ids()) == ["evt_all"])


# -- backpressure ------------------------------------------------------------------------------------------
def test_503_with_retry_after_when_the_backlog_limit_is_reached(tmp_path: Path) -> None:
    recorder = Recorder()
    recorder.down = True
    settings = settings_for(tmp_path, webhook_backlog_limit=3, webhook_retry_after_s=45)
    with app_client(settings, recorder) as client:
        for i in range(3):
            assert post(client, f"evt_b{i}").json()["status"] == "accepted"
        time.sleep(0.6)  # the backlog count is refreshed every half second
        r = post(client, "evt_b3")
        assert r.status_code == 503 and r.headers["Retry-After"] == "45"
        # unselected events count against nothing but are refused as well while the relay is behind
        assert post(client, "evt_b4", **payout("delivered")).status_code == 503
        # an id already kept is still answered duplicate: the service stops retrying it
        assert post(client, "evt_b1").json()["status"] == "duplicate"
        recorder.down = False  # Prefect is back: the relay catches up (after its backoff) ...
        wait_for(lambda: sorted(recorder.ids()) == ["evt_b0", "evt_b1", "evt_b2"], timeout=20)
        wait_for(lambda: client.app.state.webhooks.inbox.backlog() == 0)
        time.sleep(0.6)
        # ... and the service's retry of the refused delivery is accepted and forwarded
        assert post(client, "evt_b3").json()["status"] == "accepted"
        wait_for(lambda: recorder.ids()["evt_b3"] == 1)
    assert set(recorder.ids().values()) == {1}


# -- lost, then sent again ---------------------------------------------------------------------------------
class LossySender:
    """A Prefect that answers every send but loses the first copy of some events (a full broker queue)."""

    def __init__(self, lose: set[str]) -> None:
        self.lose = {uuid.uuid5(EVENT_NAMESPACE, i) for i in lose}
        self.stored: Counter[uuid.UUID] = Counter()
        self.sent: Counter[uuid.UUID] = Counter()

    async def send(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            self.sent[e["id"]] += 1
            if e["id"] in self.lose:
                self.lose.discard(e["id"])
                continue
            if e["id"] not in self.stored:  # Prefect stores an event id once
                self.stored[e["id"]] += 1

    async def confirm(self, events: list[dict[str, Any]]) -> set[uuid.UUID]:
        return {e["id"] for e in events if e["id"] in self.stored}

    async def aclose(self) -> None:
        return None


def test_an_event_prefect_lost_is_sent_again_and_stored_once(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    migrate(engine)
    inbox = WebhookInbox(engine)
    for i in range(5):
        assert inbox.accept(
            {"id": f"evt_l{i}", "type": "settlement.status_changed", "data": {}}, forward=True
        )
    sender = LossySender({"evt_l2"})
    relay = Relay(inbox, sender, lease_s=0.5, idle_s=0.05)
    assert asyncio.run(relay.drain(15)) == 0
    engine.dispose()
    lost = uuid.uuid5(EVENT_NAMESPACE, "evt_l2")
    assert sender.sent[lost] == 2 and sum(sender.sent.values()) == 6
    assert sorted(sender.stored.values()) == [1] * 5


class BatchRecordingSender(LossySender):
    """A Prefect that is down until told otherwise and records the size of every send that reached it."""

    def __init__(self) -> None:
        super().__init__(set())
        self.down = True
        self.batches: list[int] = []

    async def send(self, events: list[dict[str, Any]]) -> None:
        if self.down:
            raise ConnectionError("Prefect is down")
        self.batches.append(len(events))
        await super().send(events)


def test_a_storm_is_forwarded_in_paced_batches_each_id_once_across_a_prefect_outage(tmp_path: Path) -> None:
    """Deliveries arriving one by one reach Prefect in a few batched POSTs (not one each), each id once."""
    from payops.store.webhook_inbox import GroupCommit

    engine = open_engine(f"sqlite:///{tmp_path / 'b.sqlite3'}")
    migrate(engine)
    inbox = WebhookInbox(engine)
    writer = GroupCommit(inbox)
    sender = BatchRecordingSender()
    ids = [f"evt_b{i}" for i in range(400)]

    async def scenario() -> None:
        relay = Relay(inbox, sender, lease_s=5, idle_s=0.05, pace_s=0.5)
        runner = asyncio.create_task(relay.run())
        for n, event_id in enumerate(ids):  # ~250 a second, each waking the relay as the receiver does
            envelope = {"id": event_id, "type": "settlement.status_changed", "data": {}}
            assert await asyncio.wrap_future(writer.submit(envelope, True))
            relay.wake.set()
            if n == 200:
                sender.down = False  # Prefect is back half-way through the storm
            await asyncio.sleep(0.004)
        deadline = time.monotonic() + 30
        while await asyncio.to_thread(inbox.backlog) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        relay.stop()
        await runner

    asyncio.run(scenario())
    writer.close()
    assert inbox.backlog() == 0
    engine.dispose()
    assert sorted(sender.stored.values()) == [1] * len(ids)  # every id in Prefect, once
    assert sum(sender.batches) == len(ids)  # nothing sent twice once Prefect was up
    assert len(sender.batches) <= 15  # paced: a handful of POSTs for 400 deliveries, not one each


def test_a_redelivery_of_an_accepted_unforwarded_id_is_not_lost(tmp_path: Path) -> None:
    """The issue's permanent loss: accepted, dropped before Prefect had it, redelivery answered duplicate."""
    recorder = Recorder()
    recorder.down = True
    with app_client(settings_for(tmp_path), recorder) as client:
        assert post(client, "evt_r1").json()["status"] == "accepted"
        time.sleep(0.5)  # the relay tried and failed
    assert recorder.events == []
    with app_client(settings_for(tmp_path), recorder) as client:  # a restart; Prefect still down
        assert post(client, "evt_r1", secret=OLD).json()["status"] == "duplicate"
        recorder.down = False
        wait_for(lambda: recorder.ids() == Counter({"evt_r1": 1}), timeout=20)
        time.sleep(0.5)
    assert recorder.ids() == Counter({"evt_r1": 1})


# -- two receivers, one PostgreSQL inbox -------------------------------------------------------------------
def test_two_receivers_on_one_postgresql_inbox_forward_each_id_once(tmp_path: Path) -> None:
    from payops.deployments.scaleout.postgres import PrivatePostgres

    with PrivatePostgres(free_port()) as pg:
        url = f"postgresql+psycopg://prefect:{pg.password}@127.0.0.1:{pg.port}/prefect"
        recorder = Recorder()
        ids = [f"evt_pg{i:04d}" for i in range(400)]
        settings = settings_for(tmp_path, database_url=url, webhook_lease_s=5)
        with app_client(settings, recorder) as a, app_client(settings, recorder) as b:
            with ThreadPoolExecutor(16) as pool:
                # every id goes to both receivers, as retries spread over replicas would
                answers = list(pool.map(lambda i: (post(a, i).json(), post(b, i).json()), ids))
            odd = [
                (x, y) for x, y in answers if {x.get("status"), y.get("status")} != {"accepted", "duplicate"}
            ]
            assert odd == []
            wait_for(lambda: len(recorder.events) >= len(ids), timeout=60)
            wait_for(lambda: a.app.state.webhooks.inbox.backlog() == 0, timeout=30)
            time.sleep(1.0)
            relays = {a.app.state.webhooks.relay.owner, b.app.state.webhooks.relay.owner}
        assert len(relays) == 2
        assert recorder.ids() == Counter(dict.fromkeys(ids, 1))


# -- SIGKILL right after the answer, during a Prefect outage -----------------------------------------------
def _console(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "payops.deployments.console", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else "exited"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("console did not start")


def _stop(proc: subprocess.Popen[bytes], sig: int) -> bytes:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    try:
        _out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _out, err = proc.communicate()
    return err or b""


@pytest.mark.e2e
def test_answered_delivery_survives_sigkill_and_a_prefect_outage_and_reaches_prefect_once(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect.settings import PREFECT_API_URL

    api = str(PREFECT_API_URL.value())
    env = {
        **os.environ,
        "PAYOPS_WEBHOOK_SECRETS": f"{OLD},{NEW}",
        "PAYOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'payops.sqlite3'}",
        "PAYOPS_WEBHOOK_LEASE_S": "2",
        "PAYOPS_UPLOAD_URL": str(tmp_path / "up"),
        "PAYOPS_REPORT_URL": str(tmp_path / "rep"),
        "PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api",  # nothing listens: Prefect is down
        "PREFECT_CLIENT_MAX_RETRIES": "0",
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    event_id = f"evt_kill_{uuid.uuid4().hex[:8]}"
    proc = _console(port, env)
    try:
        _wait_up(url, proc)
        now = datetime.now(UTC).isoformat()
        r = post(httpx.Client(base_url=url, timeout=10), event_id, created_at=now)
        assert r.status_code == 200 and r.json()["status"] == "accepted"
    finally:
        err = _stop(proc, signal.SIGKILL)  # right after the answer
    assert proc.returncode == -signal.SIGKILL
    assert f"webhook delivery id={event_id} type=settlement.status_changed outcome=accepted" in err.decode()
    assert b"failed_partial" not in err  # the body is never logged

    proc = _console(port, {**env, "PREFECT_API_URL": api})  # restarted; Prefect is back
    prefect_id = str(uuid.uuid5(EVENT_NAMESPACE, event_id))
    try:
        _wait_up(url, proc)

        def in_prefect() -> list[dict[str, Any]]:
            r = httpx.post(
                f"{api}/events/filter",
                json={"filter": {"id": {"id": [prefect_id]}, "occurred": {"since": "2026-01-01T00:00:00Z"}}},
                timeout=10,
            )
            return r.json()["events"]

        wait_for(lambda: bool(in_prefect()), timeout=60)
        engine = open_engine(env["PAYOPS_DATABASE_URL"])
        try:
            wait_for(lambda: WebhookInbox(engine).backlog() == 0, timeout=30)
        finally:
            engine.dispose()
        r = post(httpx.Client(base_url=url, timeout=10), event_id)
        assert r.json()["status"] == "duplicate"
    finally:
        _stop(proc, signal.SIGTERM)
    events = in_prefect()
    assert len(events) == 1 and events[0]["event"] == "payments.settlement.status_changed"


# -- payops webhooks status --------------------------------------------------------------------------------
def test_webhooks_status_shows_backlog_oldest_unforwarded_and_failures(tmp_path: Path) -> None:
    import json

    from payops.deployments.cli import app
    from typer.testing import CliRunner

    url = f"sqlite:///{tmp_path / 'payops.sqlite3'}"
    engine = open_engine(url)
    migrate(engine)
    inbox = WebhookInbox(engine)
    for i, forward in enumerate([True, True, False]):
        inbox.accept({"id": f"evt_s{i}", "type": "settlement.status_changed", "data": {}}, forward=forward)
    inbox.mark_forwarded(["evt_s0"])
    inbox.mark_failed(inbox.claim("test", 10, 30), "ConnectError: Prefect down")
    engine.dispose()
    result = CliRunner().invoke(app, ["webhooks", "status", "--database-url", url, "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert {k: figures[k] for k in ["total", "forwarded", "kept_only", "backlog", "failing"]} == {
        "total": 3,
        "forwarded": 1,
        "kept_only": 1,
        "backlog": 1,
        "failing": 1,
    }
    assert figures["last_error"] == "ConnectError: Prefect down" and figures["oldest_unforwarded_at"] > 0
    human = CliRunner().invoke(app, ["webhooks", "status", "--database-url", url])
    assert "backlog (not yet in Prefect): 1" in human.stdout and "Prefect down" in human.stdout
    bad = CliRunner().invoke(app, ["webhooks", "status", "--database-url", "not a url:hunter2"])
    assert bad.exit_code == 1 and "--database-url" in bad.output and "Traceback" not in bad.output
    assert "hunter2" not in bad.output  # a URL's password never reaches the terminal


# -- the events catch-up shares the inbox ------------------------------------------------------------------
class FeedClient:
    """``client.events.list`` over a fixed feed, one page."""

    def __init__(self, feed: list[dict[str, Any]]) -> None:
        from payops.connectors.payments.models import WebhookEnvelope

        self.items = [WebhookEnvelope.model_validate(e) for e in feed]
        self.events = self
        self.api_calls: Counter[str] = Counter()

    async def list(self, after: str | None, limit: int) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(items=[] if after else self.items, next_after=None)


class MemoryCursorStore:
    """The catch-up's cursor and seen ids in memory (`events_sync.CursorStore`; the flow keeps them in
    Prefect Variables)."""

    def __init__(self) -> None:
        self.after: str | None = None
        self.seen: list[str] = []

    async def load(self) -> tuple[str | None, list[str]]:
        return self.after, list(self.seen)

    async def save_seen(self, seen: list[str]) -> None:
        self.seen = list(seen)

    async def save_cursor(self, after: str | None) -> None:
        self.after = after


def test_catch_up_and_receiver_share_the_inbox_and_its_seen_ids(tmp_path: Path) -> None:
    from payops.tasks.events.events_sync import sync_events

    recorder = Recorder()
    recorder.down = True  # the receiver keeps evt_c1 but cannot forward it yet
    with app_client(settings_for(tmp_path), recorder) as client:
        assert post(client, "evt_c1").json()["status"] == "accepted"
        inbox: WebhookInbox = client.app.state.webhooks.inbox
        feed = [
            {"id": "evt_c1", "type": "settlement.status_changed", "data": {"reference": "S"}},
            {
                "id": "evt_c2",
                "type": "payout.status_changed",
                "data": {"reference": "P", "status": "delivered"},
            },
            {
                "id": "evt_c3",
                "type": "collection.status_changed",
                "data": {"reference": "C", "status": "settled"},
            },
        ]
        emitted = Recorder()
        result = asyncio.run(
            sync_events(FeedClient(feed), MemoryCursorStore(), emitted, inbox=inbox, forward=ForwardFilter())
        )
        assert (result.duplicates_skipped, result.kept_not_forwarded, result.emitted) == (1, 1, 1)
        assert list(emitted.ids()) == ["evt_c3"]
        # what the catch-up read is now a duplicate for the receiver, and is not forwarded again
        assert post(client, "evt_c3").json()["status"] == "duplicate"
        assert post(client, "evt_c2").json()["status"] == "duplicate"
        recorder.down = False
        wait_for(lambda: inbox.backlog() == 0, timeout=20)
        status = inbox.status()
    assert list(recorder.ids()) == ["evt_c1"]
    assert (status.total, status.forwarded, status.kept_only) == (3, 2, 1)


def test_group_commit_answers_each_delivery_after_its_commit_and_one_accept_per_id(tmp_path: Path) -> None:
    from payops.store.webhook_inbox import GroupCommit

    engine = open_engine(f"sqlite:///{tmp_path / 'g.sqlite3'}")
    migrate(engine)
    writer = GroupCommit(WebhookInbox(engine))
    ids = [f"evt_g{i % 50}" for i in range(400)]  # every id delivered 8 times, concurrently
    with ThreadPoolExecutor(32) as pool:
        answers = list(
            pool.map(
                lambda i: (i, writer.accept({"id": i, "type": "payout.accepted", "data": {}}, False)), ids
            )
        )
    writer.close()
    assert Counter(i for i, new in answers if new) == Counter({f"evt_g{i}": 1 for i in range(50)})
    assert all(i in WebhookInbox(engine) for i, _new in answers)  # committed before the answer
    assert WebhookInbox(engine).status().total == 50
    engine.dispose()


def test_one_log_line_per_delivery_even_with_the_root_logger_at_warning(tmp_path: Path) -> None:
    """`payops console` keeps Prefect's logging set-up (root at WARNING): the delivery lines still appear."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    root.addHandler(handler)
    try:
        with app_client(settings_for(tmp_path), Recorder()) as client:
            assert post(client, "evt_log1").status_code == 200
            assert post(client, "evt_log1").status_code == 200
            body, headers = delivery("evt_log2")
            assert client.post("/webhooks/payments", content=body + b" ", headers=headers).status_code == 400
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    lines = [line for line in stream.getvalue().splitlines() if "webhook delivery" in line]
    assert lines[:2] == [
        "webhook delivery id=evt_log1 type=settlement.status_changed outcome=accepted",
        "webhook delivery id=evt_log1 type=settlement.status_changed outcome=duplicate",
    ]
    assert len(lines) == 3 and lines[2].startswith("webhook delivery id=evt_log2 outcome=refused")
    assert "failed_partial" not in stream.getvalue()  # never the body
