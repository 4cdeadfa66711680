"""Which Prefect server a command talks to, and the temporary one payops owns when there is none.

Order: the server configured by ``PREFECT_API_URL`` (environment or Prefect profile); else the one this
payops home's ``payops serve`` runs, as its record says (`store.home`): never an address shared by every
home, which another home's serve may own; its login is read from the home (`deployments.prefect_login`);
else a temporary server started here, announced once on stderr.

Prefect's own temporary ("ephemeral") server is not used: it is a plain child process that outlives a
killed parent. Ours runs the same single-process uvicorn command on a free 127.0.0.1 port, on the same
SQLite database as the home's serve (`home_prefect_env`), started like ``payops serve``'s children
(`deployments.processes.start_child`: its own process group, SIGTERM when payops dies, also on SIGKILL); a
normal exit stops it explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from payops.deployments.prefect_login import serve_record_login
from payops.deployments.processes import (
    children_use_prefect_api,
    free_port,
    start_child,
    stop_child,
    wait_http,
)
from payops.tasks.runtime.scratch import scratch_dir

if TYPE_CHECKING:
    from payops.store.home import ServeRecord
    from payops.store.settings import PayopsSettings

NOTICE = "starting a local Prefect server, about 20 s; `payops serve` keeps one running"
STARTUP_TIMEOUT_S = 180.0
SERVE_ANSWER_S = 10.0
"""How long a command waits for its home's recorded `payops serve` to answer (it may be busy)."""


class ServeUnreachable(RuntimeError):
    """The home's `payops serve` is recorded as running but its Prefect server does not answer."""


def home_prefect_env(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """``env`` for a Prefect server of ``home``: its database under the home (``PREFECT_HOME`` =
    ``home/prefect``) unless ``PREFECT_HOME`` is set, so two homes never share runs."""
    out = dict(env)
    out.setdefault("PREFECT_HOME", str(home / "prefect"))
    return out


def answers(api_url: str, timeout: float = 0.5) -> bool:
    """True when a Prefect API answers ``GET {api_url}/health`` with 200 within ``timeout`` seconds."""
    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


class LocalPrefectServer:
    """A temporary Prefect API server owned by this process (stopped by :meth:`stop` or by its death)."""

    def __init__(self, home: Path, port: int | None = None) -> None:
        self.home = home  # the payops home whose Prefect database (PREFECT_HOME) the server uses
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._logs: tempfile.TemporaryDirectory[str] | None = None

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
        env = home_prefect_env({k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}, self.home)
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
        self._logs = scratch_dir("prefect-server")  # one a killed payops left is swept by the next
        log = Path(self._logs.name) / "server.log"
        self.proc = start_child(self.command(), self.environment(), log)
        try:
            wait_http(f"{self.api_url}/health", self.proc, timeout, "the local Prefect server")
        except RuntimeError as exc:
            said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            self.stop()
            raise RuntimeError(f"{exc}{': ' + said[-1] if said else ''}") from None

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 10 s."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_child(proc)
        if self._logs is not None:
            self._logs.cleanup()
            self._logs = None


def _configured_api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


@contextmanager
def this_process_uses_prefect_api(url: str, auth_string: str | None) -> Iterator[None]:
    """Inside the block this process's Prefect client (Prefect's settings, never the environment) talks to
    the Prefect API at ``url``, sending ``auth_string`` (None: the configured login, if any), and never
    starts a hidden temporary server of Prefect's own. A Prefect runner started inside the block passes
    these settings on to the flow runs it starts."""
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_SERVER_ALLOW_EPHEMERAL_MODE,
        temporary_settings,
    )

    updates: dict[Any, Any] = {PREFECT_API_URL: url, PREFECT_SERVER_ALLOW_EPHEMERAL_MODE: False}
    if auth_string is not None:
        updates[PREFECT_API_AUTH_STRING] = auth_string
    with temporary_settings(updates=updates):
        yield


@contextmanager
def use_prefect_api(url: str, auth_string: str | None) -> Iterator[None]:
    """This process (Prefect's settings: :func:`this_process_uses_prefect_api`) and the children it starts
    inside the block (their environment) talk to the Prefect API at ``url``, sending ``auth_string`` (None:
    the configured login, if any)."""
    from payops.deployments.prefect_login import children_use_prefect_login

    with (
        children_use_prefect_api(url),
        children_use_prefect_login(auth_string),
        this_process_uses_prefect_api(url, auth_string),
    ):
        yield


def _serve_api(record: ServeRecord, home: Path) -> str:
    """The Prefect API of the home's running serve; :class:`ServeUnreachable` when it does not answer."""
    url = record.prefect_api_url
    if not answers(url, timeout=SERVE_ANSWER_S):
        raise ServeUnreachable(
            f"payops serve of the home {home} (pid {record.pid}) does not answer at {url}: "
            "wait until it prints 'serving', or stop it"
        )
    return url


@contextmanager
def prefect_api(settings: PayopsSettings, say: Callable[[str], None]) -> Iterator[str]:
    """The Prefect API URL flows in this block use (see the module docstring): the configured one, the
    ``payops serve`` of the settings' home (with its login), else a temporary server started here that stops
    when the block ends."""
    with running_prefect_api(settings) as running:
        if running is not None:
            yield running
            return
    say(NOTICE)
    server = LocalPrefectServer(settings.home_dir())
    server.start()
    try:
        with use_prefect_api(server.api_url, None):
            try:
                yield server.api_url
            finally:
                _send_what_prefect_holds()
    finally:
        server.stop()


def _send_what_prefect_holds(timeout_s: float = 5.0) -> None:
    """Send the run logs and events Prefect's background workers still hold to the temporary server before
    it stops; else they are sent at exit to a server that is gone, and the command ends with Prefect's
    "Error logging to API" on the operator's screen."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout_s)


@contextmanager
def running_prefect_api(settings: PayopsSettings) -> Iterator[str | None]:
    """The Prefect API URL flows in this block use when one runs, never starting a server: the configured
    one, else the one of the home's running ``payops serve`` (with its login), else None."""
    from payops.store.home import read_serve_record

    configured = _configured_api_url()
    if configured:
        yield configured
        return
    home = settings.home_dir()
    record = read_serve_record(home)
    if record is None:
        yield None
        return
    url = _serve_api(record, home)
    with use_prefect_api(url, serve_record_login(record)):
        yield url
