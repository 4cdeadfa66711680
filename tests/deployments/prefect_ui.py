"""Drive Prefect's own UI (the default V2 UI of Prefect 3.8) served by ``payops serve --sandbox``.

``all_in_one_with_ui`` starts ``payops serve --sandbox`` in its own process group on free 127.0.0.1 ports
with a private PREFECT_HOME and PAYOPS_HOME, and stops it and every process under it when the block ends.
The page helpers find elements the way an operator does: by role, label and visible text (selectors read
from PrefectHQ/prefect ``ui-v2/src``: the custom run form, the flow run's actions menu, the Resume dialog,
the state badge).
"""

from __future__ import annotations

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

from deployments.serve import ROOT
from tests.deployments.console_harness import PASSWORD, free_port


@dataclass
class AllInOne:
    """A running ``payops serve --sandbox``: its process (group leader), log, homes and URLs."""

    proc: subprocess.Popen[bytes]
    log: Path
    payops_home: Path
    ui: str  # the V2 UI's base (Prefect 3.8's default UI)
    api: str
    console: str
    sandbox: str

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll ``predicate`` until truthy; fail with the serve log's tail if time runs out or serve exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"payops serve exited early:\n{self.tail()}"
            try:
                value = predicate()
            except httpx.HTTPError:
                value = None
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"{what} not reached in {timeout:.0f} s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def flow_run(self, run_id: str) -> dict[str, Any]:
        return httpx.get(f"{self.api}/flow_runs/{run_id}", timeout=10).json()

    def deployment_id(self, name: str) -> str:
        """The id of deployment ``name`` once the runner has registered it (shortly after "serving")."""

        def registered() -> str | None:
            found = httpx.post(f"{self.api}/deployments/filter", json={}, timeout=10).json()
            return next((d["id"] for d in found if d["name"] == name), None)

        return str(self.wait_for(registered, 60, f"deployment {name} registered"))

    def payment_events(self) -> list[dict[str, Any]]:
        """The ``payments.payout.*`` events Prefect holds (relayed from the emulator's webhooks)."""
        body = {"filter": {"event": {"prefix": ["payments.payout."]}}, "limit": 10}
        return list(httpx.post(f"{self.api}/events/filter", json=body, timeout=10).json()["events"])

    def artifact_text(self, key: str) -> str:
        """The latest artifact under ``key`` as text (its markdown, or its table as JSON)."""
        body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}
        found = httpx.post(f"{self.api}/artifacts/filter", json=body, timeout=10).json()
        assert found, f"no artifact {key!r}"
        data = found[0]["data"]
        return data if isinstance(data, str) else json.dumps(data)

    def payouts_posted(self) -> int:
        """Payouts the emulator has accepted so far (every POST of a batch item creates one)."""
        stats = httpx.get(f"{self.sandbox}/_sandbox/stats", timeout=10).json()
        return sum(env["payouts"] for biz in stats["businesses"].values() for env in biz.values())


def add_user(env: dict[str, str], name: str, role: str) -> None:
    """``payops users add NAME --role ROLE`` with the test password on stdin."""
    subprocess.run(
        [sys.executable, "-m", "deployments.cli", "users", "add", name, "--role", role],
        input=PASSWORD + "\n",
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
    )


@contextmanager
def all_in_one_with_ui(tmp_path: Path, users: dict[str, str]) -> Iterator[AllInOne]:
    """``payops serve --sandbox`` with Prefect's UI on, ``users`` (name → role) added first; the process
    group is killed when the block ends, whatever happened in it."""
    ports = {"port": free_port(), "console": free_port(), "sandbox": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PAYOPS_"))}
    env.update(
        {
            "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "PAYOPS_HOME": str(tmp_path / "payops-home"),
            "PREFECT_SERVER_UI_ENABLED": "true",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
    )
    for name, role in users.items():
        add_user(env, name, role)
    log = tmp_path / "serve.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deployments.cli",
                "serve",
                "--sandbox",
                "--port",
                str(ports["port"]),
                "--console-port",
                str(ports["console"]),
                "--sandbox-port",
                str(ports["sandbox"]),
            ],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    prefect = f"http://127.0.0.1:{ports['port']}"
    served = AllInOne(
        proc=proc,
        log=log,
        payops_home=tmp_path / "payops-home",
        ui=f"{prefect}/v2",
        api=f"{prefect}/api",
        console=f"http://127.0.0.1:{ports['console']}",
        sandbox=f"http://127.0.0.1:{ports['sandbox']}",
    )
    try:
        served.wait_for(lambda: "serving" in log.read_text(), 150, "payops serve serving its deployments")
        yield served
    finally:
        stop_tree(proc)


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


# -- Prefect's V2 UI --------------------------------------------------------------------------------------
def start_custom_run(page: Any, ui: str, deployment_id: str, fill: Callable[[Any], None]) -> str:
    """Deployment page → Run → Custom run; ``fill(page)`` sets the parameters; Submit; follow the toast's
    "View run". Returns the new flow run's id."""
    page.goto(f"{ui}/deployments/deployment/{deployment_id}")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Custom run").click()
    page.get_by_label("Source", exact=True).wait_for()
    fill(page)
    page.get_by_role("button", name="Submit").click()
    page.get_by_role("button", name="View run").click()
    run_url = re.compile(r"/runs/flow-run/([0-9a-f-]{36})")
    page.wait_for_url(run_url, wait_until="commit")  # a client-side route change: no "load" event
    return run_url.search(page.url).group(1)  # type: ignore[union-attr]


def open_flow_run(page: Any, ui: str, run_id: str) -> None:
    page.goto(f"{ui}/runs/flow-run/{run_id}")
    state_badge(page).wait_for()


def state_badge(page: Any) -> Any:
    """The flow run page's state badge (StateBadge: class ``bg-state-<type>-100``)."""
    return page.locator("[class*='bg-state-']").first


def open_resume_dialog(page: Any) -> Any:
    """The flow run's actions menu → Resume; returns the dialog once its form has loaded."""
    page.get_by_role("button", name="Open menu").last.click()
    page.get_by_role("menuitem", name="Resume").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Resume").wait_for()
    return dialog


def resume_description(dialog: Any) -> Any:
    """The markdown the flow gave its pause (``keyset.description``), shown above the form, once rendered
    (the dialog renders it lazily: the box is empty for a moment)."""
    box = dialog.locator(".prose")
    box.locator("p").first.wait_for()
    return box


def reload_until_text(page: Any, url: str, pattern: re.Pattern[str], timeout_s: float) -> str:
    """Open ``url`` until an element's whole text matches ``pattern`` (pages that do not refresh by
    themselves); returns that text."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(url)
        page.wait_for_load_state("networkidle")
        found = page.get_by_text(pattern)
        if found.count():
            return str(found.first.inner_text()).strip()
        assert time.monotonic() < deadline, f"{pattern.pattern} never appeared on {url}"
        time.sleep(2)
