"""The tasks' transport: aiohttp's pool under httpx, with httpx's own meaning for each kind of failure."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from payops.tasks.runtime.clients import PooledTransport
from payops.tasks.runtime.ratelimit import AdaptiveRate, RateLimitedTransport


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A 127.0.0.1 port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"  # closed when the block ends: nothing listens


async def test_a_refused_connection_is_a_connect_error_not_a_timeout() -> None:
    async with httpx.AsyncClient(transport=PooledTransport()) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(closed_port() + "/v1/wallet")
    assert not isinstance(caught.value, httpx.TimeoutException)


async def test_a_service_that_never_answers_is_a_read_timeout(silent_server: str) -> None:
    async with httpx.AsyncClient(transport=PooledTransport(), timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(silent_server + "/v1/wallet")


async def test_closing_the_client_closes_the_connection_pool(silent_server: str) -> None:
    pooled = PooledTransport()
    async with httpx.AsyncClient(transport=RateLimitedTransport(pooled, AdaptiveRate(100)), timeout=0.1) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get(silent_server + "/v1/wallet")
        session = pooled.client
        assert session is not None and not session.closed
    assert session.closed
