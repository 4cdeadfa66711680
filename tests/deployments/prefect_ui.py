"""Drive Prefect's own UI (the default V2 UI of Prefect 3.8) served by ``payops serve --sandbox``
(started by ``tests/deployments/serve_harness.py``).

The helpers find elements the way an operator does: by role, label and visible text (selectors read from
PrefectHQ/prefect ``ui-v2/src``: the login page, the custom run form, the flow run's actions menu, the Resume
dialog, the state badge, the event feed).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout


def log_in(page: Any, ui: str, auth_string: str) -> None:
    """Log in to Prefect's UI with its server's auth string: any page of a UI whose server has a login
    redirects to its login page (``/login``: ui-v2/src/routes/__root.tsx, components/auth/login-page.tsx,
    one password field and a Login button); the UI checks the string against the API and keeps it in the
    browser's local storage. Returns once the UI has left the login page."""
    page.goto(f"{ui}/dashboard")
    page.wait_for_url(re.compile(r"/login(\?|$)"))
    page.locator("input[type=password]").fill(auth_string)
    page.get_by_role("button", name="Login", exact=True).click()
    page.wait_for_url(lambda url: "/login" not in url)


def start_custom_run(page: Any, ui: str, deployment_id: str, fill: Callable[[Any], None]) -> str:
    """Deployment page → Run → Custom run; ``fill(page)`` sets the parameters; Submit; open the new run's
    page. Returns the new flow run's id.

    The id comes from the form's own ``create_flow_run`` answer, not from the success toast's "View run"
    button: a CI run on this 2-core machine waited 30 s for that button in vain (a transient toast, gone or
    never drawn while the server was busy with two runs already started), though the run itself is what
    the operator relies on."""
    page.goto(f"{ui}/deployments/deployment/{deployment_id}")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Custom run").click()
    page.get_by_label("Source", exact=True).wait_for()
    fill(page)
    create_path = f"/deployments/{deployment_id}/create_flow_run"
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith(create_path), timeout=120_000
    ) as created:
        page.get_by_role("button", name="Submit").click()
    answer = created.value
    assert answer.ok, f"the Custom run form's create_flow_run answered {answer.status}: {answer.text()}"
    run_id = str(answer.json()["id"])
    open_flow_run(page, ui, run_id)
    return run_id


def open_flow_run(page: Any, ui: str, run_id: str, attempts: int = 3) -> None:
    """The flow run's page in Prefect's UI. The page may come from the console's run page, which refreshes
    itself every 2 s while a run moves: a refresh that starts with this navigation interrupts it, and it is
    asked again (once the page has left the console, nothing refreshes it)."""
    for attempt in range(1, attempts + 1):
        try:
            page.goto(f"{ui}/runs/flow-run/{run_id}")
            break
        except PlaywrightError as exc:
            if "interrupted by another navigation" not in str(exc) or attempt == attempts:
                raise
    try:
        state_badge(page).wait_for(timeout=60_000)
    except PlaywrightTimeout:  # the app rendered nothing under a full suite's load (seen in CI): once more
        page.reload()
        state_badge(page).wait_for(timeout=60_000)


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
