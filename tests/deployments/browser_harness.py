"""Helpers for the console's browser tests (headless Debian Chromium through Playwright)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from payops.sandbox import SandboxServer

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).parent / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def local_console(
    tmp_path: Path, emulator: SandboxServer, monkeypatch: Any, policy: str = "none", **overrides: Any
) -> tuple[Any, Any]:
    """A console app in local single-process mode (its own database under ``tmp_path``, approval policy
    ``policy`` stated there) paying against ``emulator``, with the approval key pair in the session's payops
    home (the console signs with its private half, the flows it runs verify with the public one); returns
    (app, launcher)."""
    from payops.deployments.console import ConsoleSettings, LocalLauncher, create_app
    from payops.store.approvals import state_policy
    from payops.tasks.approval.approval_keys import ensure_key_pair

    for key, value in emulator.env.items():
        monkeypatch.setenv(key, value)
    database_url = f"sqlite:///{tmp_path / 'payops.sqlite3'}"
    monkeypatch.setenv("PAYOPS_DATABASE_URL", database_url)
    settings = ConsoleSettings(
        database_url=database_url,
        upload_url=str(tmp_path / "uploads"),
        report_url=str(tmp_path / "reports"),
        **overrides,
    )
    ensure_key_pair(settings.home_dir())
    launcher = LocalLauncher()
    app = create_app(settings, launcher=launcher)
    state_policy(app.state.console.engine, policy)
    return app, launcher


def console_runs() -> list[Any]:
    """Flow runs the console started (sync client: Playwright's sync API owns this thread's event loop)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["payops-console"]))
        )


def log_in(page: Any, name: str, password: str) -> None:
    page.fill("#username", name)
    page.fill("#password", password)
    page.click("button[type=submit]")


def reload_until(page: Any, selector: str, timeout_s: float) -> None:
    """Reload the page until ``selector`` shows (paused run pages do not refresh themselves). A running
    run's page refreshes itself: a bare look could land mid-navigation ("Execution context was destroyed",
    seen in CI), so each look is Playwright's wait, which looks again in the page that loads."""
    from playwright.sync_api import TimeoutError as LookTimedOut

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            page.wait_for_selector(selector, state="attached", timeout=1000)
            return
        except LookTimedOut:
            assert time.monotonic() < deadline, f"{selector} never appeared on {page.url}"
            page.reload()


def payouts_at(emulator: SandboxServer) -> int:
    stats = httpx.get(f"{emulator.base_url}/_sandbox/stats", timeout=10).json()
    return sum(env["payouts"] for biz in stats["businesses"].values() for env in biz.values())


def acknowledge_all(page: Any) -> list[str]:
    """Tick every name-check acknowledgement on an approval page (Approve stays disabled until then);
    returns the findings acknowledged."""
    kinds = []
    for box in page.query_selector_all("input.ack-box"):
        box.check()
        kinds.append(str(box.get_attribute("value")))
    return kinds


VIEWPORT = {"width": 1280, "height": 900}
"""The window the layout checks run in: a laptop's width."""

_OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = e => ["auto", "scroll", "hidden"].includes(getComputedStyle(e).overflowX);
  const out = [];
  for (const e of document.querySelectorAll("body *")) {
    const box = e.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    let holder = e.parentElement;
    while (holder && !holder.classList.contains("card") && !scrolls(holder)) holder = holder.parentElement;
    if (holder && scrolls(holder)) continue;  // clipped by a scroll container: reachable by scrolling it
    const edge = holder ? holder.getBoundingClientRect().right : width;
    if (box.right > Math.min(edge, width) + 1 || box.left < -1) {
      const name = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "");
      out.push(`${name} right ${Math.round(box.right)} > ${Math.round(edge)}`);
    }
  }
  return out;
}"""


def overflowing(page: Any) -> list[str]:
    """Elements whose box reaches past their card or the window (those inside a scroll container count as
    inside: they are reached by scrolling it)."""
    return list(page.evaluate(_OVERFLOWING))
