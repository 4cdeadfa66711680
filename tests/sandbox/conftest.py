"""Fixtures of the emulator conformance suite: a fresh app on a ManualClock per test, reached via ASGI."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

import httpx
import pytest
from payops.sandbox import ManualClock, SandboxConfig, create_app

from tests.sandbox.sandbox_support import START, Api


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run this folder's async tests on the session loop (the fixtures' loop scope in pyproject)."""
    for item in items:
        if "tests/sandbox" in str(item.fspath) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def config(clock: ManualClock) -> SandboxConfig:
    return SandboxConfig(clock=clock)


@pytest.fixture
def app(config: SandboxConfig):
    return create_app(config)


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as c:
        yield c


@pytest.fixture
async def api(client: httpx.AsyncClient) -> Api:
    a = Api(client)
    await a.login()
    return a


@pytest.fixture
def state(app):
    return app.state.sandbox.state


@pytest.fixture
def demo(state):
    return state.env("demo", "test")
