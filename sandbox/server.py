"""``SandboxServer``: the emulator on a real uvicorn in a daemon thread (127.0.0.1, free port)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI

from .app import create_app
from .config import SandboxConfig
from .runtime import RESOURCE, Sandbox
from .state import SandboxState

DEMO_CLIENT_ID = "demo-test-client"
DEMO_CLIENT_SECRET = "demo-test-secret"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def env_vars(
    base_url: str, client_id: str = DEMO_CLIENT_ID, client_secret: str = DEMO_CLIENT_SECRET
) -> dict[str, str]:
    """The ``PAYOPS_*`` settings a client needs for ``base_url`` (demo business, test environment)."""
    return {
        "PAYOPS_BASE_URL": base_url,
        "PAYOPS_AUTH_URL": f"{base_url}/auth",
        "PAYOPS_CLIENT_ID": client_id,
        "PAYOPS_CLIENT_SECRET": client_secret,
        "PAYOPS_RESOURCE": RESOURCE,
    }


class SandboxServer:
    """``with SandboxServer(config) as s:`` gives ``base_url``, ``auth_url``, ``env``, ``app``, ``state``.

    The server thread is a daemon and stops on exit (or with ``stop()``).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        app: FastAPI | None = None,
    ) -> None:
        self.app = app or create_app(config)
        self.host = host
        self.port = port or free_port(host)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def sandbox(self) -> Sandbox:
        """The emulator's runtime objects (config, clock, state)."""
        return self.app.state.sandbox

    @property
    def state(self) -> SandboxState:
        """The emulator's state (businesses, wallets, payouts, events)."""
        return self.sandbox.state

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (paths carry ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def auth_url(self) -> str:
        """Identity service address (token endpoint at ``{auth_url}/v1/oauth/token``)."""
        return f"{self.base_url}/auth"

    @property
    def env(self) -> dict[str, str]:
        """``PAYOPS_*`` variables for the demo business's test credential."""
        return env_vars(self.base_url)

    def start(self, timeout: float = 10.0) -> SandboxServer:
        """Start uvicorn in a daemon thread and wait until it accepts connections."""
        config = uvicorn.Config(
            self.app, host=self.host, port=self.port, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"sandbox-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sandbox did not start on {self.base_url}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._server = None
        self._thread = None

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SandboxServer({self.base_url!r})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("SandboxServer cannot be pickled")
