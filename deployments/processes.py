"""The processes payops starts and stops: servers in their own process group that die with their parent,
a supervisor stopping all of them within one deadline, the signals that ask a long-lived command to stop and
the guard that holds it to its deadline.

`payops serve`, the CLI's temporary Prefect server, `make demo`, the scale-out recipe and the benchmarks all
start their children here, so every child is stopped the same way: SIGTERM to its process group, SIGKILL to
what is still running when the grace time is over.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
from payops.tasks.runtime.child_processes import preexec_own_group_dying_with_parent

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "ROOT",
    "StopRequested",
    "Supervisor",
    "children_use_prefect_api",
    "exit_by_deadline",
    "free_port",
    "kill_descendants",
    "port_free",
    "prefect_cli",
    "prefect_server_command",
    "prefect_server_env",
    "read_env_file",
    "sandbox_command",
    "start_child",
    "start_sandbox",
    "stop_child",
    "stop_children",
    "stop_on_signals",
    "wait_http",
]


def free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port on ``host`` (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port`` (bound as uvicorn binds: SO_REUSEADDR, so a port in
    TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def read_env_file(path: Path) -> dict[str, str]:
    """The ``export KEY=value`` lines ``payops sandbox --env-file`` writes, as a mapping."""
    env = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.strip().strip("'\"")
    return env


def sandbox_command(host: str, port: int, env_file: Path, *options: str) -> list[str]:
    """``payops sandbox`` on ``host:port`` writing its credential exports to ``env_file``, as a command."""
    cli = [sys.executable, "-m", "payops.deployments.cli", "sandbox", "--host", host, "--port", str(port)]
    return [*cli, "--env-file", str(env_file), *options]


def start_sandbox(
    port: int, env_file: Path, latency_ms: int = 0, *options: str, start_timeout_s: float = 30
) -> subprocess.Popen[bytes]:
    """The emulator for demo and benchmarks (`options`: more `payops sandbox` flags, e.g. --rate-limit)."""
    cmd = sandbox_command(
        "127.0.0.1", port, env_file, "--delivery-delay", "1.5", "--latency-ms", str(latency_ms), *options
    )
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
    )
    deadline = time.monotonic() + start_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the emulator exited: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}"
            )
        try:
            if (
                env_file.exists()
                and httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200
            ):
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the emulator did not start within {start_timeout_s:g} s")


def start_child(
    cmd: list[str], env: Mapping[str, str], log_path: Path | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own process group; output to ``log_path`` (or discarded), a file its owner alone
    reads (mode 0600 when it is made here)."""
    out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_own_group_dying_with_parent(),
        )  # noqa: PLW1509 - setsid + pdeathsig only
    finally:
        if log_path:
            os.close(out)  # the child has its own copy


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already (PermissionError: macOS reports a reaped group this way)


def stop_children(
    children: Sequence[tuple[str, subprocess.Popen[bytes]]],
    grace_s: float = 10.0,
    say: Callable[[str], None] = lambda _: None,
    sig: int = signal.SIGTERM,
) -> None:
    """``sig`` (SIGTERM) to every child's process group at once, SIGKILL to the groups of those still running
    after ``grace_s`` (one deadline for all: children stopping in turn would add their grace times up)."""
    running = [(name, proc) for name, proc in children if proc.poll() is None]
    for name, proc in running:
        say(f"stopping {name} ...")
        _signal_group(proc, sig)
    deadline = time.monotonic() + grace_s
    for name, proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop within {grace_s:g} s: killed")
            _signal_group(proc, signal.SIGKILL)
            proc.wait(5)


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """``sig`` (SIGTERM) to the child's process group, SIGKILL after ``timeout``."""
    stop_children([("child", proc)], timeout, sig=sig)


def wait_http(url: str, proc: subprocess.Popen[bytes] | None, timeout: float, what: str) -> None:
    """Wait until ``url`` answers 200, or fail when the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer at {url} within {timeout:.0f} s")


@contextmanager
def children_use_prefect_api(url: str) -> Iterator[None]:
    """Children started inside the block talk to the Prefect API at ``url``: a command writes
    ``PREFECT_API_URL`` into its own environment here, which the processes it starts inherit (`payops serve`
    hands its children their environment instead: `deployments.serve`). The previous value comes back when
    the block ends.
    This process's own Prefect client reads Prefect's settings, not the environment: callers pair this with
    ``prefect.settings.temporary_settings``."""
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous


def prefect_cli() -> list[str]:
    return [sys.executable, "-m", "prefect"]


def prefect_server_command() -> list[str]:
    """The command of a Prefect server (API, UI, services) payops runs: Prefect's app as ``prefect server
    start`` runs it, retrying busy answers for clients that do not (`deployments.prefect_app`)."""
    return [sys.executable, "-m", "payops.deployments.prefect_app"]


def prefect_server_env(host: str, port: int, base: Mapping[str, str]) -> dict[str, str]:
    """Environment of a Prefect server (:func:`prefect_server_command`) on ``host:port`` (API and UI on the
    same port); the UI build goes under the server's ``PREFECT_HOME`` (Prefect writes it into site-packages
    otherwise)."""
    from payops.deployments.console.settings import prefect_home

    env = dict(base)
    home = Path(env["PREFECT_HOME"]) if env.get("PREFECT_HOME") else prefect_home()
    env.pop("PREFECT_API_URL", None)
    env.update(
        {
            "PREFECT_SERVER_API_HOST": host,
            "PREFECT_SERVER_API_PORT": str(port),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_API_URL": f"http://{host}:{port}/api",
            "PREFECT_SERVER_UI_STATIC_DIRECTORY": env.get("PREFECT_SERVER_UI_STATIC_DIRECTORY")
            or str(home / "ui-build"),
        }
    )
    return env


class Supervisor:
    """Children started in order, stopped together (:func:`stop_children`)."""

    def __init__(self, log_dir: Path, say: Callable[[str], None] = print) -> None:
        self.log_dir = log_dir
        self.say = say
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self, name: str, cmd: list[str], env: Mapping[str, str], cwd: Path = ROOT
    ) -> subprocess.Popen[bytes]:
        proc = start_child(cmd, env, self.log_dir / f"{name}.log", cwd)
        self.children.append((name, proc))
        return proc

    def stop_all(self, grace_s: float = 10.0) -> None:
        stop_children(list(reversed(self.children)), grace_s, self.say)
        self.children.clear()


def kill_descendants(say: Callable[[str], None] = lambda _: None) -> int:
    """SIGKILL every process still running under this one (e.g. a flow run its runner did not end in
    time: they run in sessions of their own, out of reach of a terminal's Ctrl-C); returns how many."""
    import psutil

    left = psutil.Process().children(recursive=True)
    for proc in left:
        try:
            say(f"killing process {proc.pid} ({' '.join(proc.cmdline()[:4])})")
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(left, timeout=5)
    return len(left)


class StopRequested(BaseException):
    """Raised in the main thread by the first SIGINT or SIGTERM. A BaseException, as KeyboardInterrupt is:
    no ``except Exception`` on the way may swallow a request to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """In this block the first of ``signals`` raises :class:`StopRequested` in the main thread, wherever it
    waits (a health check, a child's start, the serving loop); later ones are ignored, because the stop they
    would interrupt is already under way and bounded. The previous handlers return at the end."""
    raised = False

    def handler(signum: int, frame: object) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise StopRequested(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


def exit_by_deadline(seconds: float, say: Callable[[str], None] = print, code: int = 1) -> threading.Thread:
    """A daemon thread that ends this process ``seconds`` from now if it is still running then.

    The last resort of a bounded stop: what runs after the children are stopped is not ours to bound
    (Prefect drains its event and log queues at interpreter exit, retrying each event eleven times against a
    server that is gone). ``os._exit`` is the only way out of a hung exit handler; stdout and stderr are
    flushed first."""

    def guard() -> None:
        time.sleep(seconds)
        say(f"still stopping after {seconds:g} s: exiting now")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                continue  # a closed stream has nothing left to flush
        os._exit(code)

    thread = threading.Thread(target=guard, name="payops-exit-deadline", daemon=True)
    thread.start()
    return thread
