"""Webhook delivery: HTTP attempts of due deliveries, and the background worker used with a system clock.

``deliver_due(sandbox)`` brings every environment up to the clock, takes the deliveries whose next attempt is
due, POSTs them (10 s timeout, redirects not followed) and records each attempt. With a ``ManualClock`` tests
call it (or ``POST /_sandbox/webhooks/deliver-due``) after advancing the clock; otherwise a daemon thread
started with the first webhook endpoint calls it every ``WORKER_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
import threading
import time
import weakref
from dataclasses import dataclass
from datetime import datetime

import httpx

from .clock import ManualClock
from .engine.webhooks import RESPONSE_START_CHARS, TIMEOUT_S, error_class, record_attempt, sign
from .idempotency import render
from .resources import Delivery, DeliveryAttempt
from .runtime import Sandbox

log = logging.getLogger("payops.sandbox.delivery")

WORKER_INTERVAL_S = 0.5
_ssl_context: ssl.SSLContext | None = None


def _ssl() -> ssl.SSLContext:
    """One TLS context for every round (building one loads the CA bundle: too slow to do per client)."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx.create_ssl_context()
    return _ssl_context


@dataclass
class _Job:
    delivery: Delivery
    url: str
    body: bytes
    headers: dict[str, str]
    at: datetime


def _take_due(sandbox: Sandbox) -> list[_Job]:
    state = sandbox.state
    jobs: list[_Job] = []
    with state.lock:
        state.advance_all()
        now = sandbox.clock.now()
        timestamp = int(now.timestamp())
        for env in state.envs.values():
            ext = env.resources
            for delivery in ext.deliveries.values():
                if delivery.status != "pending" or delivery.in_flight or delivery.next_attempt_at is None:
                    continue
                if delivery.next_attempt_at > now:
                    continue
                endpoint = ext.endpoints.get(delivery.endpoint_id)
                if endpoint is None or not endpoint.enabled:
                    delivery.status, delivery.next_attempt_at = "cancelled", None
                    continue
                body = render(delivery.event.to_wire())
                signatures = " ".join(
                    sign(s, delivery.event.id, timestamp, body) for s in endpoint.secrets_at(now)
                )
                headers = {
                    "Content-Type": "application/json",
                    "Webhook-Id": delivery.event.id,
                    "Webhook-Timestamp": str(timestamp),
                    "Webhook-Signature": signatures,
                    "User-Agent": "payops-sandbox-webhooks/1",
                }
                delivery.in_flight = True
                jobs.append(_Job(delivery, endpoint.url, body, headers, now))
    return jobs


def _transport_error_class(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        cause: BaseException | None = exc
        while cause is not None:
            if (
                isinstance(cause, ConnectionRefusedError)
                or getattr(cause, "errno", None) == errno.ECONNREFUSED
            ):
                return "refused"
            cause = cause.__cause__ or cause.__context__
        if "refused" in str(exc).lower():
            return "refused"
    return "network"


async def _attempt(client: httpx.AsyncClient, job: _Job) -> DeliveryAttempt:
    started = time.monotonic()
    try:
        response = await client.post(job.url, content=job.body, headers=job.headers)
    except httpx.TransportError as exc:
        return DeliveryAttempt(
            at=job.at,
            duration_ms=int((time.monotonic() - started) * 1000),
            error_class=_transport_error_class(exc),
            response_start=str(exc)[:RESPONSE_START_CHARS],
        )
    return DeliveryAttempt(
        at=job.at,
        duration_ms=int((time.monotonic() - started) * 1000),
        status_code=response.status_code,
        error_class=error_class(response.status_code),
        response_start=response.text[:RESPONSE_START_CHARS],
    )


async def deliver_due(sandbox: Sandbox) -> int:
    """Make every due attempt now; returns how many attempts were made."""
    jobs = _take_due(sandbox)
    if not jobs:
        return 0
    try:
        async with httpx.AsyncClient(
            timeout=TIMEOUT_S, follow_redirects=False, trust_env=False, verify=_ssl()
        ) as client:
            results = await asyncio.gather(*(_attempt(client, job) for job in jobs), return_exceptions=True)
    finally:
        with sandbox.state.lock:
            for job in jobs:
                job.delivery.in_flight = False
    with sandbox.state.lock:
        for job, result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("webhook delivery %s crashed: %r", job.delivery.id, result)
                result = DeliveryAttempt(
                    at=job.at,
                    duration_ms=0,
                    error_class="network",
                    response_start=repr(result)[:RESPONSE_START_CHARS],
                )
            record_attempt(job.delivery, result)
    return len(jobs)


class DeliveryWorker:
    """Daemon thread delivering due webhooks every ``interval`` seconds; stops with ``stop()`` or when its
    sandbox is garbage-collected."""

    def __init__(self, sandbox: Sandbox, interval: float = WORKER_INTERVAL_S) -> None:
        self._sandbox = weakref.ref(sandbox)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-webhooks", daemon=True)

    def start(self) -> DeliveryWorker:
        """Start the thread."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to end and wait for it."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    def _run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        while not self._stop.is_set():
            sandbox = self._sandbox()
            if sandbox is None:
                return
            try:
                await deliver_due(sandbox)
            except Exception:  # keep the worker alive; the failure is logged
                log.exception("webhook delivery round failed")
            del sandbox
            await asyncio.sleep(self._interval)


_workers: weakref.WeakKeyDictionary[Sandbox, DeliveryWorker] = weakref.WeakKeyDictionary()
_workers_lock = threading.Lock()


def worker_wanted(sandbox: Sandbox) -> bool:
    """``SandboxConfig.webhook_worker``, or by default: on with a system clock, off with a ManualClock."""
    flag = getattr(sandbox.config, "webhook_worker", None)
    return (not isinstance(sandbox.clock, ManualClock)) if flag is None else bool(flag)


def ensure_worker(sandbox: Sandbox) -> DeliveryWorker | None:
    """Start the sandbox's background worker once, when wanted."""
    if not worker_wanted(sandbox):
        return None
    with _workers_lock:
        worker = _workers.get(sandbox)
        if worker is None or not worker.alive:
            worker = _workers[sandbox] = DeliveryWorker(sandbox).start()
        return worker


def stop_worker(sandbox: Sandbox) -> None:
    """Stop the sandbox's worker, if any."""
    with _workers_lock:
        worker = _workers.pop(sandbox, None)
    if worker is not None:
        worker.stop()
