"""The Prefect server payops runs retries the answers Prefect gives a busy SQLite database (503), so that
requests of clients without their own retry (Prefect's UI: the Custom run form's Submit) still succeed."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import sqlalchemy.exc
from fastapi import FastAPI, Request
from payops.deployments.prefect_app import RetryWhenBusy
from prefect.server.api.server import custom_internal_exception_handler


def busy_error() -> sqlalchemy.exc.OperationalError:
    """What SQLite raises when a read-then-write transaction's snapshot went stale under another writer."""
    orig = sqlite3.OperationalError("database is locked")
    orig.sqlite_errorname = "SQLITE_BUSY_SNAPSHOT"  # type: ignore[attr-defined]
    return sqlalchemy.exc.OperationalError("INSERT INTO flow_run ...", {}, orig)


def prefect_like(busy_times: int, error: Exception | None = None) -> tuple[FastAPI, list[bytes]]:
    """An app with Prefect's own exception handler and mount whose POST fails ``busy_times`` times, then
    echoes its body; the bodies it saw, one per attempt."""
    api = FastAPI()
    api.add_exception_handler(Exception, custom_internal_exception_handler)
    seen: list[bytes] = []

    @api.post("/deployments/{deployment_id}/create_flow_run")
    async def create(deployment_id: str, request: Request) -> dict[str, str]:
        seen.append(await request.body())
        if len(seen) <= busy_times:
            raise error or busy_error()
        return {"deployment": deployment_id, "body": seen[-1].decode()}

    app = FastAPI()
    app.mount("/api", api)  # as Prefect mounts its API beside the UI: routing rewrites the scope
    return app, seen


async def post(app: RetryWhenBusy, body: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://prefect") as client:
        return await client.post("/api/deployments/d1/create_flow_run", content=body)


def test_a_busy_answer_is_retried_with_the_same_body_and_the_client_sees_only_success() -> None:
    app, seen = prefect_like(busy_times=2)
    pauses: list[float] = []

    async def sleep(s: float) -> None:
        pauses.append(s)

    answer = asyncio.run(post(RetryWhenBusy(app, pauses=(0.1, 0.2, 0.4), sleep=sleep), b'{"parameters": {}}'))
    assert answer.status_code == 200
    assert answer.json() == {"deployment": "d1", "body": '{"parameters": {}}'}
    assert seen == [b'{"parameters": {}}'] * 3
    assert len(pauses) == 2 and 0.1 <= pauses[0] <= 0.15 and 0.2 <= pauses[1] <= 0.3


def test_a_database_that_stays_busy_gets_prefects_503_after_the_last_attempt() -> None:
    app, seen = prefect_like(busy_times=99)

    async def no_wait(s: float) -> None:
        return None

    answer = asyncio.run(post(RetryWhenBusy(app, pauses=(0.1, 0.2), sleep=no_wait), b"{}"))
    assert answer.status_code == 503
    assert answer.json() == {"exception_message": "Service Unavailable"}
    assert len(seen) == 3


def test_other_failures_are_not_retried() -> None:
    app, seen = prefect_like(busy_times=1, error=RuntimeError("a bug"))
    answer = asyncio.run(post(RetryWhenBusy(app, pauses=(0.0,)), b"{}"))
    assert answer.status_code == 500
    assert len(seen) == 1
