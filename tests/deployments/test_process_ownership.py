"""Every process payops starts ends with it, also on SIGKILL: the temporary Prefect server of a flow command,
the emulator of `make demo`/benchmarks; and a configured or `payops serve` server is used, not a new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from payops.deployments.prefect_server import NOTICE
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.home import ServeRecord, write_serve_record

from tests.flows.approval_support import prepared_home
from tests.flows.support import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


class Cli:
    """``payops ARGS`` in a subprocess, its stderr collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "payops.deployments.cli", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"payops exited ({self.proc.returncode}) before {what}: {self.stderr}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout:.0f} s: {self.stderr}")
            time.sleep(0.1)

    def kill_and_check_nothing_is_left(self) -> None:
        """SIGKILL payops; every process it started must be gone a few seconds later."""
        started = self.descendants()
        assert started, "payops had started no process"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        gone, alive = psutil.wait_procs(started, timeout=15)
        assert not alive, f"left behind: {[(p.pid, p.cmdline()) for p in alive if p.is_running()]}"


def _servers(cli: Cli) -> list[psutil.Process]:
    found = []
    for p in cli.descendants():
        try:
            if "prefect.server.api.server:create_app" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def _server_answers(cli: Cli, patience_s: float = 20) -> bool:
    """Whether the Prefect server payops started answers its health check within ``patience_s``: on a busy
    host (the suite's other workers) one answer took more than a second, while the run it served went on."""
    deadline = time.monotonic() + patience_s
    while True:
        for server in _servers(cli):
            cmd = server.cmdline()
            port = cmd[cmd.index("--port") + 1]
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5).status_code == 200
            except httpx.HTTPError:
                answered = False  # not up yet, or slow: asked again until the deadline
            if answered:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """No configured Prefect server, a payops home of its own (no `payops serve` recorded), a private
    PREFECT_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYOPS_", "PREFECT_API"))}
    env.update(
        PAYOPS_HOME=str(tmp_path / "payops-home"),
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    return env


@pytest.fixture(scope="module")
def slow_emulator() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=60)) as server:
        yield server


def test_sigkill_while_the_temporary_server_starts_leaves_nothing(tmp_path: Path, bare_env) -> None:
    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix="OWN"))
    cli = Cli(["payouts", str(sheet), "--report-dir", str(tmp_path / "r"), "--dry-run"], bare_env)
    cli.wait_for(lambda: NOTICE in cli.stderr and bool(_servers(cli)), "server start")
    time.sleep(1.0)  # the server's interpreter is still importing Prefect
    cli.kill_and_check_nothing_is_left()


def test_a_run_on_a_temporary_server_ends_with_its_logs_sent_and_the_server_gone(
    tmp_path: Path, bare_env, slow_emulator: SandboxServer
) -> None:
    """The temporary server stops after Prefect's workers have sent the run's last logs and events: no
    "Error logging to API" at the end of an operator's command (issue 46)."""
    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix="OWL"))
    env = {**bare_env, **slow_emulator.env, "PREFECT_LOGGING_LEVEL": "INFO"}  # an operator's level
    args = ["payouts", str(sheet), "--report-dir", str(tmp_path / "r"), "--dry-run"]
    cli = Cli(args, env)
    assert cli.proc.wait(240) == 0, cli.stderr
    cli._reader.join(10)
    assert any(NOTICE in line for line in cli.stderr), cli.stderr  # it did run on a temporary server
    assert any("Finished in state Dry run" in line for line in cli.stderr), cli.stderr
    assert not [line for line in cli.stderr if "Error logging to API" in line or "Traceback" in line]


def test_sigkill_during_a_run_leaves_nothing(tmp_path: Path, bare_env, slow_emulator: SandboxServer) -> None:
    before = emulator_stats(slow_emulator.base_url)["payouts"]
    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix="OWR"))
    env = {**bare_env, **slow_emulator.env, **prepared_home(tmp_path / "payops-home")}
    cli = Cli(["payouts", str(sheet), "--report-dir", str(tmp_path / "r"), "--no-name-check"], env)

    def sent() -> bool:
        return emulator_stats(slow_emulator.base_url)["payouts"] == before + 3

    cli.wait_for(sent, "payouts sent")  # the run is polling: payouts take 60 s to settle here
    assert cli.stderr.count(NOTICE) == 1 and _server_answers(cli)
    cli.kill_and_check_nothing_is_left()


def test_a_configured_server_is_used_and_no_server_starts(prefect_harness, tmp_path: Path, bare_env) -> None:
    from prefect.settings import PREFECT_API_URL

    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix="OWC"))
    args = ["payouts", str(sheet), "--report-dir", str(tmp_path / "r"), "--dry-run"]
    # The home's `payops serve` (this process stands for it), found by the record it keeps in the home.
    served_home = tmp_path / "served-home"
    served_home.mkdir()
    record = ServeRecord(pid=os.getpid(), prefect_api_url=PREFECT_API_URL.value(), console_url="http://x")
    write_serve_record(record, served_home)
    # A command that runs a flow on this host (payouts go through the home's payops server; a transactions
    # report does not) finds the configured Prefect server, or the home's serve's by its record.
    host_args = ["transactions", "report", "--report-dir", str(tmp_path / "r")]
    for command, env, code in (
        (args, {**bare_env, "PREFECT_API_URL": PREFECT_API_URL.value()}, 2),  # configured; cannot price: 2
        (host_args, {**bare_env, "PAYOPS_HOME": str(served_home)}, 1),  # the home's serve; no credential: 1
    ):
        cli = Cli(command, env)
        seen_servers = []
        while cli.proc.poll() is None:
            seen_servers += _servers(cli)
            time.sleep(0.2)
        cli._reader.join(10)
        assert cli.proc.returncode == code and "no Payments credentials" in "\n".join(cli.stderr), cli.stderr
        assert NOTICE not in cli.stderr and not seen_servers


def test_the_demo_emulator_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from payops.deployments.processes import free_port, start_sandbox\n"
        "proc = start_sandbox(free_port(), Path(sys.argv[1]))\n"
        "print(proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "env")], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        emulator = psutil.Process(int(parent.stdout.readline()))
        assert emulator.is_running()
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        gone, alive = psutil.wait_procs([emulator], timeout=15)
        assert not alive
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
