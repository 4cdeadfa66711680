"""Benchmark: signed webhook deliveries into `payops console` while the Prefect server is killed; print JSON.

Starts a Prefect server (as `payops serve` runs it, its own SQLite) and the console (one uvicorn process, the
payops database a SQLite file), both in a temporary home. Then:

1. baseline (same run, Prefect idle): console ``/healthz`` p95 and flow-run creation p95 with no deliveries;
2. storm: ``--deliveries`` signed deliveries at ``--concurrency`` (a realistic mix: every payout sends
   ``payout.accepted`` and a final ``payout.status_changed``, some fail/refund/hold, plus collections,
   settlements and transfers). Half-way the Prefect server is SIGKILLed, kept down ``--outage-s`` seconds and
   restarted on the same database. A 503 is retried after its ``Retry-After`` (capped at 2 s here; the service
   waits longer) as the service retries; throughout, ``/healthz`` is probed every 50 ms and a flow run is
   created every second through Prefect's client;
3. after the storm: wait until the inbox backlog is 0, then check that every accepted delivery is in the inbox
   and that Prefect holds exactly the events the filter selects, each once.

Deliveries go over ``--concurrency`` keep-alive HTTP/1.1 connections driven with h11 (`DeliveryConnection`),
so the load generator costs well under a millisecond of CPU per delivery; the JSON reports the CPU per
delivery of the console process (receiver and relay) and of this process, which do not depend on the load.

Usage: python benchmarks/webhooks.py [--deliveries 60000] [--concurrency 64] [--outage-s 10]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import h11  # noqa: E402
import httpx  # noqa: E402
from payops.deployments.processes import (  # noqa: E402
    free_port,
    prefect_server_command,
    prefect_server_env,
    start_child,
    stop_child,
    wait_http,
)
from payops.tasks.events.payment_events import EVENT_NAMESPACE, ForwardFilter  # noqa: E402

SECRET = "whsec-benchmark-" + uuid.uuid4().hex
HEALTH_EVERY_S = 0.05


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4)


def envelopes(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` envelopes shaped like a payout-heavy day: per payout an accepted and a final status event."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        i += 1
        kind = rng.random()
        if kind < 0.9:
            ref = f"PAY-{i:07d}"
            amount = f"{rng.randint(5, 5000)}.{rng.randint(0, 99):02d}"
            final = rng.choices(["delivered", "failed", "refunded", "held"], [90, 6, 2, 2])[0]
            out.append(
                {
                    "type": "payout.accepted",
                    "data": {"reference": ref, "status": "accepted", "amount": amount},
                }
            )
            out.append({"type": "payout.status_changed", "data": {"reference": ref, "status": final}})
        elif kind < 0.96:
            out.append(
                {"type": "collection.status_changed", "data": {"reference": f"COL-{i}", "status": "settled"}}
            )
        elif kind < 0.99:
            out.append(
                {"type": "transfer.status_changed", "data": {"reference": f"TRF-{i}", "status": "completed"}}
            )
        else:
            out.append(
                {
                    "type": "settlement.status_changed",
                    "data": {"reference": f"SET-{i}", "status": "completed"},
                }
            )
    now = datetime.now(UTC).isoformat()
    return [{"id": f"evt_{uuid.uuid4().hex}", "createdAt": now, **e} for e in out[:n]]


def signed(envelope: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(envelope, separators=(",", ":")).encode()
    ts = str(int(time.time()))
    mac = hmac.new(SECRET.encode(), f"{envelope['id']}.{ts}.".encode() + body, hashlib.sha256).digest()
    return body, {
        "Webhook-Id": envelope["id"],
        "Webhook-Timestamp": ts,
        "Webhook-Signature": "v1," + base64.b64encode(mac).decode(),
        "Content-Type": "application/json",
    }


class DeliveryConnection:
    """One keep-alive HTTP/1.1 connection to the console that POSTs deliveries (h11 over asyncio streams).

    Hand-rolled on purpose: with httpx's pool at 64 connections the benchmark process itself was the ceiling
    (py-spy: ~95 % of its loop in httpcore's ``_assign_requests_to_connections``, at ~80 deliveries/s with the
    console two-thirds idle). One connection per delivering coroutine, h11 for the protocol, costs a small
    fraction of that, so the figure measured is the receiver's pace.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def post(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers (lower-case) and body of one POST; raises ``OSError``/``h11.ProtocolError``."""
        if self.writer is None or self.conn.our_state is not h11.IDLE:
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.conn = h11.Connection(h11.CLIENT)
        head = [("Host", f"{self.host}:{self.port}"), ("Content-Length", str(len(body)))]
        request = h11.Request(method="POST", target=path, headers=head + list(headers.items()))
        assert self.reader is not None
        try:
            self.writer.write(
                self.conn.send(request)
                + self.conn.send(h11.Data(data=body))
                + self.conn.send(h11.EndOfMessage())
            )
            await self.writer.drain()
            status, answer_headers, chunks = 0, {}, []
            while True:
                event = self.conn.next_event()
                if event is h11.NEED_DATA:
                    data = await self.reader.read(65536)
                    if not data:
                        raise ConnectionResetError("the console closed the connection")
                    self.conn.receive_data(data)
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    answer_headers = {k.decode().lower(): v.decode() for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionResetError("the console closed the connection")
            if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
                self.conn.start_next_cycle()
            return status, answer_headers, b"".join(chunks)
        except BaseException:
            await self.close()
            raise


class Storm:
    """The deliveries, the probes and what they saw."""

    def __init__(self, console: str, api: str, concurrency: int) -> None:
        self.console = console
        self.api = api
        self.concurrency = concurrency
        self.answers: Counter[str] = Counter()
        self.accepted: set[str] = set()
        self.health: list[float] = []
        self.health_errors = 0
        self.flow_runs: list[tuple[float, float | None]] = []  # (started at, seconds; None = failed)
        self.stop = threading.Event()

    async def deliver(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        url = httpx.URL(self.console)
        http = DeliveryConnection(url.host, url.port or 80)
        try:
            while True:
                try:
                    envelope = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                while True:
                    body, headers = signed(envelope)
                    try:
                        status, answer_headers, answer = await asyncio.wait_for(
                            http.post("/webhooks/payments", body, headers), 30
                        )
                    except (OSError, TimeoutError, h11.ProtocolError) as exc:
                        self.answers[type(exc).__name__] += 1
                        await asyncio.sleep(1)
                        continue
                    if status == 200:
                        self.answers[json.loads(answer)["status"]] += 1
                        self.accepted.add(envelope["id"])
                        break
                    self.answers[str(status)] += 1
                    await asyncio.sleep(min(2.0, float(answer_headers.get("retry-after", 1))))
        finally:
            await http.close()

    def probe_health(self) -> None:
        """``/healthz`` every 50 ms from its own thread (the delivery loop's load does not skew it)."""
        with httpx.Client(base_url=self.console, timeout=10) as http:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    http.get("/healthz").raise_for_status()
                    self.health.append(time.perf_counter() - t0)
                except httpx.HTTPError:
                    self.health_errors += 1
                time.sleep(HEALTH_EVERY_S)

    def probe_flow_runs(self, deployment_id: uuid.UUID) -> None:
        """A flow run created through Prefect's client every second, from its own thread."""
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            while not self.stop.is_set():
                started, t0 = time.monotonic(), time.perf_counter()
                try:
                    client.create_flow_run_from_deployment(deployment_id)
                    self.flow_runs.append((started, time.perf_counter() - t0))
                except Exception:  # noqa: BLE001 - a failed creation is a figure of this benchmark
                    self.flow_runs.append((started, None))
                time.sleep(1)

    def start_probes(self, deployment_id: uuid.UUID) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self.probe_health, daemon=True),
            threading.Thread(target=self.probe_flow_runs, args=(deployment_id,), daemon=True),
        ]
        for t in threads:
            t.start()
        return threads

    def stop_probes(self, threads: list[threading.Thread]) -> None:
        self.stop.set()
        for t in threads:
            t.join(120)


async def make_deployment() -> uuid.UUID:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        flow_id = await client.create_flow_from_name("webhooks-benchmark")
        return await client.create_deployment(flow_id=flow_id, name="probe", paused=True)


async def baseline(console: str, deployment_id: uuid.UUID, seconds: float = 10) -> dict[str, Any]:
    storm = Storm(console, "", 0)
    probes = storm.start_probes(deployment_id)
    await asyncio.sleep(seconds)
    await asyncio.to_thread(storm.stop_probes, probes)
    created = [s for _t, s in storm.flow_runs if s is not None]
    return {
        "healthz_p95_ms": round((p95(storm.health) or 0) * 1000, 1),
        "flow_run_create_p95_s": p95(created),
        "flow_run_create_failures": sum(1 for _t, s in storm.flow_runs if s is None),
    }


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (load-independent cost of its work)."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def inbox_figures(db_url: str) -> tuple[set[str], int]:
    from payops.store import open_engine
    from payops.store.webhook_inbox import WebhookInbox, WebhookInboxEntry
    from sqlalchemy import select

    engine = open_engine(db_url)
    try:
        with engine.connect() as conn:
            ids = set(conn.execute(select(WebhookInboxEntry.id)).scalars())
        return ids, WebhookInbox(engine).backlog()
    finally:
        engine.dispose()


def prefect_has(api: str, ids: list[str]) -> tuple[set[str], int]:
    """Which of ``ids`` Prefect stores, and how many ``payments.*`` events it holds in all."""
    by_uuid = {str(uuid.uuid5(EVENT_NAMESPACE, i)): i for i in ids}
    found: set[str] = set()
    window = {"since": "2020-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"}
    with httpx.Client(base_url=api, timeout=60) as http:
        keys = list(by_uuid)
        for start in range(0, len(keys), 50):
            r = http.post(
                "/events/filter",
                json={"filter": {"id": {"id": keys[start : start + 50]}, "occurred": window}, "limit": 50},
            )
            r.raise_for_status()
            found |= {by_uuid[e["id"]] for e in r.json()["events"]}
        r = http.post(
            "/events/filter",
            json={"filter": {"event": {"prefix": ["payments."]}, "occurred": window}, "limit": 1},
        )
        r.raise_for_status()
        total = int(r.json()["total"])
    return found, total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deliveries", type=int, default=60_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--outage-s", type=float, default=10.0)
    parser.add_argument("--drain-timeout-s", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="Keep the temporary home (logs, databases)")
    parser.add_argument(
        "--prefect-db",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the Prefect server's database: its default SQLite file, or a private PostgreSQL cluster "
        "(docs/operations.md's production shape for heavy webhooks)",
    )
    args = parser.parse_args()

    load_at_start = round(os.getloadavg()[0], 2)
    home = Path(tempfile.mkdtemp(prefix="payops-bench-webhooks-"))
    port, console_port = free_port(), free_port()
    api = f"http://127.0.0.1:{port}/api"
    console = f"http://127.0.0.1:{console_port}"
    db_url = f"sqlite:///{home / 'payops.sqlite3'}"
    base_env = {
        **os.environ,
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PAYOPS_HOME": str(home),
    }
    os.environ.update(
        {k: base_env[k] for k in ("PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED", "PAYOPS_HOME")}
    )
    os.environ["PREFECT_API_URL"] = api
    server_env = prefect_server_env("127.0.0.1", port, base_env)
    postgres = None
    if args.prefect_db == "postgresql":
        from payops.deployments.scaleout.postgres import PrivatePostgres

        postgres = PrivatePostgres(free_port()).start()
        server_env["PREFECT_API_DATABASE_CONNECTION_URL"] = postgres.url
    console_env = {
        **base_env,
        "PREFECT_API_URL": api,
        "PAYOPS_WEBHOOK_SECRETS": SECRET,
        "PAYOPS_DATABASE_URL": db_url,
        "PAYOPS_UPLOAD_URL": str(home / "uploads"),
        "PAYOPS_REPORT_URL": str(home / "reports"),
    }
    server_cmd = prefect_server_command()
    console_cmd = [sys.executable, "-m", "payops.deployments.console", "--port", str(console_port)]
    server = start_child(server_cmd, server_env, home / "prefect-server.log")
    console_proc = None
    try:
        wait_http(f"{api}/health", server, 180, "the Prefect server")
        console_proc = start_child(console_cmd, console_env, home / "console.log")
        wait_http(f"{console}/healthz", console_proc, 60, "the console")
        deployment_id = asyncio.run(make_deployment())
        base = asyncio.run(baseline(console, deployment_id))

        feed = envelopes(args.deliveries)
        storm = Storm(console, api, args.concurrency)
        outage: dict[str, float] = {}
        cpu: dict[str, float] = {}

        async def kill_prefect_half_way() -> None:
            nonlocal server
            while len(storm.accepted) < len(feed) // 2:
                await asyncio.sleep(0.1)
            outage["killed_at"] = time.monotonic()
            await asyncio.to_thread(stop_child, server, 5.0, signal.SIGKILL)
            await asyncio.sleep(args.outage_s)
            server = start_child(server_cmd, server_env, home / "prefect-server.log")
            await asyncio.to_thread(wait_http, f"{api}/health", server, 180, "the restarted Prefect server")
            outage["back_at"] = time.monotonic()

        async def run_storm() -> float:
            queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            for e in feed:
                queue.put_nowait(e)
            probes = storm.start_probes(deployment_id)
            killer = asyncio.create_task(kill_prefect_half_way())
            cpu0 = process_cpu_s(console_proc.pid), time.process_time()
            t0 = time.perf_counter()
            await asyncio.gather(*(storm.deliver(queue) for _ in range(args.concurrency)))
            elapsed = time.perf_counter() - t0
            cpu["console_s"] = process_cpu_s(console_proc.pid) - cpu0[0]
            cpu["client_s"] = time.process_time() - cpu0[1]
            await killer
            await asyncio.to_thread(storm.stop_probes, probes)
            return elapsed

        elapsed = asyncio.run(run_storm())
        t_drain = time.perf_counter()
        deadline = time.monotonic() + args.drain_timeout_s
        while True:
            kept, backlog = inbox_figures(db_url)
            if backlog == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        drain_s = time.perf_counter() - t_drain
        selected = [e["id"] for e in feed if ForwardFilter()(e)]
        found, prefect_total = prefect_has(api, selected)
        # A creation is an outage casualty when its request was in flight at any moment of the outage
        # (started during it, or sent just before the kill and answered only by the restarted server).
        killed_at, back_at = outage.get("killed_at", float("inf")), outage.get("back_at", float("inf"))
        outside = [
            (t, s) for t, s in storm.flow_runs if t > back_at or t + (s if s is not None else 0.0) < killed_at
        ]
        outside_s = [s for _t, s in outside]
        counted = [(t, s) for t, s in outside if s is not None]
        result = {
            "deliveries": len(feed),
            "concurrency": args.concurrency,
            "answers": dict(storm.answers),
            "accepted": len(storm.accepted),
            "accepted_lost_from_inbox": len(storm.accepted - kept),
            "deliveries_per_s": round(len(feed) / elapsed, 1),
            "storm_s": round(elapsed, 1),
            # CPU per delivery (storm only): the receiver's own pace on an unloaded core is ~1000 / this
            "console_cpu_ms_per_delivery": round(cpu["console_s"] * 1000 / len(feed), 3),
            "client_cpu_ms_per_delivery": round(cpu["client_s"] * 1000 / len(feed), 3),
            "prefect_outage_s": round(outage["back_at"] - outage["killed_at"], 1)
            if "back_at" in outage
            else None,
            "selected_for_prefect": len(selected),
            "in_prefect": len(found),
            "missing_in_prefect": len(set(selected) - found),
            "prefect_payments_events_total": prefect_total,
            "backlog_after_drain": backlog,
            "drain_after_storm_s": round(drain_s, 1),
            "healthz_p95_ms": round((p95(storm.health) or 0) * 1000, 1),
            "healthz_errors": storm.health_errors,
            "flow_runs_created": sum(1 for _t, s in storm.flow_runs if s is not None),
            "prefect_db": args.prefect_db,
            "flow_run_failures_outside_outage": sum(1 for s in outside_s if s is None),
            "flow_run_failures_during_outage": sum(1 for s in storm.flow_runs if s[1] is None)
            - sum(1 for s in outside_s if s is None),
            "flow_run_create_p95_s": p95([s for s in outside_s if s is not None]),
            # The slowest creations counted above, each with when it started relative to the kill and
            # to the restarted server's first answer (negative: before): where the time goes.
            "flow_run_create_slowest": [
                {
                    "s": round(s, 2),
                    "from_kill_s": round(t - outage.get("killed_at", t), 1),
                    "from_back_s": round(t - outage.get("back_at", t), 1),
                }
                for t, s in sorted(counted, key=lambda ts: -ts[1])[:6]
            ],
            "baseline_idle": base,
            "cpu_count": os.cpu_count(),
            "load_avg_1m_at_start": load_at_start,
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(result, indent=2))
    finally:
        if console_proc is not None:
            stop_child(console_proc)
        stop_child(server)
        if postgres is not None:
            postgres.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
