"""Which Prefect server a flow command talks to, and the temporary one payops owns when there is none.

Order: the server configured by ``PREFECT_API_URL`` (environment or Prefect profile); else the one ``payops
serve`` keeps on its documented address (``PAYOPS_SERVE_API_URL``, default ``http://127.0.0.1:4200/api``)
when it answers a short health request; else a temporary server started here, announced once on stderr.

Prefect's own temporary ("ephemeral") server is not used: it is a plain child process that outlives a
killed parent. Ours runs the same single-process uvicorn command on a free 127.0.0.1 port, with the same
SQLite database under ``PREFECT_HOME``, in its own process group, and receives SIGTERM when payops dies
(``PR_SET_PDEATHSIG``), including on SIGKILL; a normal exit stops it explicitly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from tasks.child_processes import preexec_own_group_dying_with_parent

SERVE_API_URL = "http://127.0.0.1:4200/api"
"""Where ``payops serve`` runs its Prefect server by default (docs/operations.md)."""
NOTICE = "starting a local Prefect server, about 20 s; `payops serve` keeps one running"
STARTUP_TIMEOUT_S = 180.0


def serve_api_url() -> str:
    return os.environ.get("PAYOPS_SERVE_API_URL") or SERVE_API_URL


def answers(api_url: str, timeout: float = 0.5) -> bool:
    """True when a Prefect API answers ``GET {api_url}/health`` with 200 within ``timeout`` seconds."""
    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPrefectServer:
    """A temporary Prefect API server owned by this process (stopped by :meth:`stop` or by its death)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def command(self) -> list[str]:
        """The uvicorn command Prefect's own temporary server runs (prefect.server.api.server)."""
        import prefect

        return [
            sys.executable,
            "-m",
            "uvicorn",
            "--app-dir",
            str(Path(prefect.__file__).resolve().parent.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update(
            {
                "PREFECT_UI_ENABLED": "0",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT__SERVER_EPHEMERAL": "1",  # what Prefect sets for its temporary server
                "PREFECT__SERVER_FINAL": "1",
            }
        )
        return env

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Start the server and wait until it answers; RuntimeError when it exits or time runs out."""
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop(); a pipe could fill and block
        self.proc = subprocess.Popen(
            self.command(),
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.proc.stderr.read().decode("utf-8", "replace").strip() if self.proc.stderr else ""
                last = said.splitlines()[-1] if said else ""
                raise RuntimeError(
                    f"the local Prefect server exited with code {self.proc.returncode}: {last}"
                )
            if answers(self.api_url, timeout=1.0):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the local Prefect server did not answer within {timeout:.0f} s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeout`` seconds."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            except ProcessLookupError:
                pass  # it ended between poll and kill
        if self._log is not None:
            self._log.close()
            self._log = None


def _configured_api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


@contextmanager
def prefect_api(say: Callable[[str], None]) -> Iterator[str]:
    """The Prefect API URL flows in this block use (see the module docstring); a temporary server started
    here stops when the block ends."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_ALLOW_EPHEMERAL_MODE,
        temporary_settings,
    )

    configured = _configured_api_url()
    if configured:
        yield configured
        return
    server: LocalPrefectServer | None = None
    url = serve_api_url()
    if not answers(url):
        say(NOTICE)
        server = LocalPrefectServer()
        server.start()
        url = server.api_url
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url  # for processes started from here
    try:
        with temporary_settings({PREFECT_API_URL: url, PREFECT_SERVER_ALLOW_EPHEMERAL_MODE: False}):
            yield url
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        if server is not None:
            server.stop()
