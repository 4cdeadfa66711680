"""``payops serve --sandbox`` for end-to-end tests: free 127.0.0.1 ports, a private PREFECT_HOME and
PAYOPS_HOME under the test's tmp dir, named users added first, its own process group, and every process under
it stopped when the block ends."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from payops.deployments.prefect_login import LOGIN_FILE
from payops.deployments.processes import ROOT, prefect_server_command, read_env_file
from payops.store.home import read_serve_record

from tests.deployments.console_harness import PASSWORD
from tests.prefect_template import seed_prefect_db


@dataclass
class AllInOne:
    """A running ``payops serve --sandbox``: its process (group leader), log, homes, ports and URLs."""

    proc: subprocess.Popen[bytes]
    log: Path
    ports: dict[str, int]  # port (= prefect: Prefect server and UI), console, sandbox
    payops_home: Path
    env: dict[str, str]  # serve's environment: a payops command run with it belongs to this home
    ui: str  # the V2 UI's base (Prefect 3.8's default UI)
    api: str
    console: str
    sandbox: str
    auth_string: str  # Prefect's login, from the home's prefect-auth file
    tokens: dict[str, str]  # each user's personal API token (what the docs give a person)

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        return wait_until(predicate, timeout, what, self.proc, self.log)

    def prefect(self, method: str, path: str, *, timeout: float = 10, **kwargs: Any) -> httpx.Response:
        """``METHOD {api}{path}`` on serve's Prefect API with its login, as Prefect's client sends it
        (``kwargs``: httpx's, e.g. ``json``)."""
        headers = prefect_login_header(self.auth_string)
        return httpx.request(method, f"{self.api}{path}", headers=headers, timeout=timeout, **kwargs)

    def flow_run(self, run_id: str) -> dict[str, Any]:
        return self.prefect("GET", f"/flow_runs/{run_id}").json()

    def deployment_id(self, name: str) -> str:
        """The id of deployment ``name`` once the runner has registered it (shortly after "serving")."""

        def registered() -> str | None:
            found = self.prefect("POST", "/deployments/filter", json={}).json()
            return next((d["id"] for d in found if d["name"] == name), None)

        return str(self.wait_for(registered, 60, f"deployment {name} registered"))

    def payment_events(self) -> list[dict[str, Any]]:
        """The ``payments.payout.*`` events Prefect holds (relayed from the emulator's webhooks)."""
        body = {"filter": {"event": {"prefix": ["payments.payout."]}}, "limit": 10}
        return list(self.prefect("POST", "/events/filter", json=body).json()["events"])

    def artifact_text(self, key: str) -> str:
        """The latest artifact under ``key`` as text (its markdown, or its table as JSON)."""
        body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}
        found = self.prefect("POST", "/artifacts/filter", json=body).json()
        assert found, f"no artifact {key!r}"
        data = found[0]["data"]
        return data if isinstance(data, str) else json.dumps(data)

    def payops(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str = "",
        timeout: float = 240,
        as_user: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``payops ARGS`` as a user of this home runs it (its PAYOPS_HOME, so serve's console is its payops
        server; no PREFECT_API_URL), ``as_user``'s token when given, ``env`` over serve's environment (e.g.
        the emulator's client settings)."""
        token = {"PAYOPS_API_TOKEN": self.tokens[as_user]} if as_user else {}
        return subprocess.run(
            [sys.executable, "-m", "payops.deployments.cli", *args],
            cwd=ROOT,
            env={**self.env, **token, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def emulator_env(self) -> dict[str, str]:
        """The emulator's client settings, from the file serve names in its record."""
        record = read_serve_record(self.payops_home)
        assert record is not None and record.sandbox_env_file
        return read_env_file(Path(record.sandbox_env_file))

    def console_client(self, user: str) -> httpx.Client:
        """An httpx client on the console, logged in as ``user`` (password ``PASSWORD``)."""
        client = httpx.Client(base_url=self.console, timeout=30)
        token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
        assert token is not None
        form = {"username": user, "password": PASSWORD, "csrf_token": token.group(1)}
        assert client.post("/login", data=form).status_code == 303
        return client

    def start_run(self, deployment: str, params: dict[str, Any]) -> str:
        """A flow run of ``deployment`` (by name) with ``params`` as its ``params`` parameter; its id. A busy
        Prefect server on SQLite can answer 503 (database locked): asked again, as Prefect's client does."""
        body = {"parameters": {"params": params}}

        def created() -> str | None:
            deployment_id = self.deployment_id(deployment)
            path = f"/deployments/{deployment_id}/create_flow_run"
            answer = self.prefect("POST", path, json=body, timeout=30)
            if answer.status_code == 503:
                return None
            assert answer.status_code == 201, f"create_flow_run answered {answer.status_code}: {answer.text}"
            return str(answer.json()["id"])

        return str(self.wait_for(created, 90, f"a run of {deployment} created"))

    def wait_state(self, run_id: str, states: set[str], timeout: float = 120) -> str:
        """The type of the run's state once it is one of ``states`` (PAUSED, COMPLETED...)."""

        def reached() -> str | None:
            state = self.flow_run(run_id)["state"]["type"]
            return state if state in states else None

        return str(self.wait_for(reached, timeout, f"flow run {run_id} in {sorted(states)}"))

    def stop_with(self, sig: int, timeout: float = 60) -> tuple[float, list[psutil.Process]]:
        """Send ``sig`` to ``payops serve``'s own process (not its group, as a supervisor does); the seconds
        until it exited and the processes under it still alive 1 s later."""
        children = psutil.Process(self.proc.pid).children(recursive=True)
        start = time.monotonic()
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"payops serve still running {timeout:.0f} s after {signal.Signals(sig).name}:\n"
                f"{self.log.read_text(errors='replace')[-3000:]}"
            ) from None
        took = time.monotonic() - start
        _, alive = psutil.wait_procs(children, timeout=1)
        return took, alive

    def payouts_posted(self) -> int:
        """Payouts the emulator has accepted so far (every POST of a batch item creates one)."""
        stats = httpx.get(f"{self.sandbox}/_sandbox/stats", timeout=10).json()
        return sum(env["payouts"] for biz in stats["businesses"].values() for env in biz.values())


def prefect_login_header(auth_string: str) -> dict[str, str]:
    """The header Prefect's clients send with ``PREFECT_API_AUTH_STRING`` (``Basic base64(auth string)``)."""
    return {"Authorization": f"Basic {base64.b64encode(auth_string.encode()).decode()}"}


def is_prefect_server(cmdline: list[str]) -> bool:
    """True for the command line of a Prefect API server: serve's (`prefect_server_command`), a temporary
    one of payops' or of Prefect's own (uvicorn on Prefect's app factory), or ``prefect server start``."""
    line = " ".join(cmdline)
    return (
        line.endswith(" ".join(prefect_server_command()[1:]))
        or "prefect.server.api.server:create_app" in line
        or ("server" in cmdline and "start" in cmdline)
    )


def prefect_servers(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` that are Prefect API servers (`is_prefect_server`); one that ended meanwhile
    (gone, or a zombie not yet reaped: a finished flow run's process) is not a server."""
    found = []
    for p in processes:
        try:
            line = p.cmdline()
        except psutil.NoSuchProcess:  # ZombieProcess included
            continue
        if is_prefect_server(line):
            found.append(p)
    return found


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen[bytes], log: Path
) -> Any:
    """Poll ``predicate`` until truthy (HTTP errors count as not yet); fail with the serve log's tail when
    time runs out or ``payops serve`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"payops serve exited early:\n{log.read_text(errors='replace')[-3000:]}"
        try:
            value = predicate()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} not reached in {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def host_setup(env: dict[str, str], users: dict[str, str], policy: str | None) -> dict[str, str]:
    """What the server host's admin sets up before serve starts (the test holds the home, as that admin
    does): ``users`` (name → role, password ``PASSWORD``) each with a personal API token, and the approval
    ``policy`` when given. Returns the tokens by name."""
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.users import Users

    settings = PayopsSettings(home=Path(env["PAYOPS_HOME"]))
    engine = upgrade_database(settings)
    try:
        people = Users(engine)
        tokens = {}
        for name, role in users.items():
            people.add(name, role, PASSWORD)
            tokens[name] = people.issue_token(name, "tests")
        if policy is not None:
            state_policy(engine, policy)
        return tokens
    finally:
        engine.dispose()


def serve_env(tmp_path: Path, settings: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``payops serve`` whose payops home is ``tmp_path/payops-home`` (and Prefect
    home ``tmp_path/prefect-home``), no Prefect API configured, ``settings`` over it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "PAYOPS_API_TOKEN"}
    env.update(
        {
            "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "PAYOPS_HOME": str(tmp_path / "payops-home"),
            "PREFECT_SERVER_UI_ENABLED": "true",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            **(settings or {}),
        }
    )
    return env


@contextmanager
def all_in_one(
    tmp_path: Path,
    users: dict[str, str],
    settings: dict[str, str] | None = None,
    policy: str | None = None,
    fresh_prefect: bool = False,
) -> Iterator[AllInOne]:
    """``payops serve --sandbox`` with ``users`` (name → role) added first with their tokens, the approval
    ``policy`` stated when given (else a new install's default), and ``settings`` over the environment
    (Prefect's UI on unless they turn it off), on the free ports serve picks itself (read back from the
    record it keeps in its payops home); yields once it serves its deployments and stops it, and every
    process under it, when the block ends, whatever happened in it. Its Prefect server starts on a migrated
    copy of Prefect's database (tests/prefect_template.py), or on none with ``fresh_prefect``."""
    env = serve_env(tmp_path, settings)
    if not fresh_prefect:
        seed_prefect_db(Path(env["PREFECT_HOME"]) / "prefect.db")
    tokens = host_setup(env, users, policy)
    log = tmp_path / "serve.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "payops.deployments.cli", "serve", "--sandbox"],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: "serving" in log.read_text(), 150, "payops serve serving", proc, log)
        record = read_serve_record(tmp_path / "payops-home")
        assert record is not None and record.pid == proc.pid, log.read_text()[-2000:]
        assert record.sandbox_url is not None
        yield AllInOne(
            proc=proc,
            log=log,
            ports={"port": record.ports["prefect"], **record.ports},
            payops_home=tmp_path / "payops-home",
            env=env,
            ui=f"{record.prefect_ui_url}/v2",
            api=record.prefect_api_url,
            console=record.console_url,
            sandbox=record.sandbox_url,
            auth_string=(tmp_path / "payops-home" / LOGIN_FILE).read_text().strip(),
            tokens=tokens,
        )
    finally:
        stop_tree(proc)


@contextmanager
def busy_machine(workers: int | None = None) -> Iterator[None]:
    """One process spinning on every core (or ``workers``) for the block: the machine as busy as a full test
    run beside other work makes it."""
    spin = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(spin) for _ in range(workers or os.cpu_count() or 2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(10)


def stop_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``proc``'s group (``payops serve`` stops its children), SIGKILL after 30 s; then any
    descendant still alive (children run in their own groups) is killed too."""
    if proc.poll() is not None:
        return
    descendants = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    _, alive = psutil.wait_procs(descendants, timeout=15)
    for child in alive:
        child.kill()
    psutil.wait_procs(alive, timeout=5)
