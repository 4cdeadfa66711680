"""Four eyes in headless Chromium: an admin creates an operator and two approvers and a two-approver tier; the
operator's sheet above it cannot be approved by the operator (no button, forged POST refused); one approval
sends nothing; the second pays; the audit page lists every step with names.

Local single-process mode: the flow runs in a thread of the console, on the session's Prefect test server, and
checks the signed approvals itself.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.audit import verify

from tests.deployments.browser_harness import (
    ARGS,
    CHROMIUM,
    SHOTS,
    acknowledge_all,
    local_console,
    log_in,
    payouts_at,
    reload_until,
)
from tests.deployments.console_harness import PASSWORD, good_sheet, serve_in_thread

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture
def console(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as emulator:
        app, launcher = local_console(tmp_path, emulator, monkeypatch)
        app.state.console.users.add("ada", "admin", PASSWORD)  # as `payops users add ada --role admin` does
        with serve_in_thread(app) as url:
            state = app.state.console
            yield {"url": url, "tmp": tmp_path, "emulator": emulator, "engine": state.engine, "state": state}
        launcher.join(30)


def test_two_approvers_needed_operator_cannot_approve_audit_lists_every_step(console: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium") == CHROMIUM, "Debian chromium missing: make browser-deps"
    SHOTS.mkdir(exist_ok=True)
    url, emulator = console["url"], console["emulator"]
    before = payouts_at(emulator)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:

            def session(name: str) -> Any:
                page = browser.new_context().new_page()
                page.set_default_timeout(30_000)
                page.goto(url + "/login")
                log_in(page, name, PASSWORD)
                page.wait_for_selector("#whoami")
                return page

            # The admin: a two-approver tier from 50.00, then an operator and two approvers.
            admin = session("ada")
            admin.goto(url + "/admin/rules")
            admin.fill("#tiers", "10:1, 50:2")
            admin.click("#save-rules")
            assert "from 50.00: 2 approvers" in admin.inner_text("#current-rule")
            admin.goto(url + "/admin/users")
            for name, role in [("olu", "operator"), ("bea", "approver"), ("cat", "approver")]:
                admin.fill("#new-username", name)
                admin.select_option("#new-role", role)
                admin.fill("#new-password", PASSWORD)
                admin.click("#add")
                assert role in admin.inner_text(f"#user-{name}")
            admin.fill("#new-username", "dee")
            admin.fill("#new-password", "short")
            admin.click("#add")
            assert "password too weak" in admin.inner_text("#problem")
            admin.screenshot(path=str(SHOTS / "10-users.png"), full_page=True)

            # The operator uploads a sheet of 78.00 (above the two-approver tier) and starts the run.
            operator = session("olu")
            operator.set_input_files("#sheet", str(good_sheet(console["tmp"] / "four-eyes.xlsx")))
            operator.wait_for_selector("#sample")
            assert "needs approval from 2 approvers" in operator.inner_text("#approvals-needed")
            operator.click("#submit")
            operator.wait_for_url("**/runs/*")
            run_url = operator.url
            run_id = run_url.rsplit("/", 1)[1]
            reload_until(operator, "#approval", 90)
            assert "Needs 2 approvals" in operator.inner_text("#approval")
            assert "other than olu" in operator.inner_text("#still-needed")
            assert operator.query_selector("#approve") is None  # no button for the operator
            token = operator.get_attribute("input[name=csrf_token]", "value")
            forged = operator.request.post(
                f"{url}/runs/{run_id}/approval", form={"csrf_token": token, "decision": "approve"}
            )
            assert forged.status == 403  # and the server refuses a forged POST
            operator.screenshot(path=str(SHOTS / "11-waiting.png"), full_page=True)
            assert payouts_at(emulator) == before

            # First approver: recorded, nothing is sent, the page says who must still approve.
            bea = session("bea")
            bea.goto(run_url)
            bea.fill("#comment", "amounts match the payroll")
            acknowledge_all(bea)
            bea.click("#approve")
            bea.wait_for_selector("#approved-by")
            assert "bea" in bea.inner_text("#approved-by")
            assert "1 more approval" in bea.inner_text("#still-needed")
            assert bea.query_selector("#approve") is None  # one approval per person
            time.sleep(4)  # the flow keeps waiting: nothing goes out on one approval
            assert payouts_at(emulator) == before
            bea.screenshot(path=str(SHOTS / "12-one-approval.png"), full_page=True)

            # Second approver: the run resumes with both signatures and pays.
            cat = session("cat")
            cat.goto(run_url)
            acknowledge_all(cat)
            cat.click("#approve")
            reload_until(cat, "#outcome", 120)
            assert cat.inner_text("#outcome") == "completed"
            assert "by bea, cat" in cat.inner_text("#approval-result")
            # The run's JSON summary keeps what each approver wrote, not only the combined comment.
            links = [a.get_attribute("href") for a in cat.query_selector_all("#reports a")]
            summary_link = next(h for h in links if h and h.endswith(".json"))
            decisions = cat.request.get(url + summary_link).json()["approval"]["decisions"]
            assert [(d["by"], d["decision"], d["comment"]) for d in decisions] == [
                ("bea", "approved", "amounts match the payroll"),
                ("cat", "approved", ""),
            ]
            assert payouts_at(emulator) == before + 6
            cat.screenshot(path=str(SHOTS / "13-paid.png"), full_page=True)

            # The audit page lists every step with the names of who did it.
            admin.goto(url + "/admin/audit")
            rows = [
                [c.inner_text() for c in r.query_selector_all("td")]
                for r in admin.query_selector_all("#audit tbody tr")
            ]
            steps = {(r[2], r[4]) for r in rows}
            for step in [
                ("ada", "payops.login"),
                ("ada", "payops.rules.changed"),
                ("ada", "payops.user.added"),
                ("olu", "payops.login"),
                ("olu", "payops.upload.previewed"),
                ("olu", "payops.run.started"),
                ("olu", "payops.access.denied"),  # the forged approval
                ("bea", "payops.run.approved"),
                ("cat", "payops.run.approved"),
                ("cat", "payops.run.resumed"),
            ]:
                assert step in steps, step
            added = [r[5] for r in rows if r[4] == "payops.user.added"]
            assert sorted(added) == ["user:bea", "user:cat", "user:olu"]
            assert any(r[4] == "payops.run.started" and r[5] == f"run:{run_id}" for r in rows)
            admin.screenshot(path=str(SHOTS / "14-audit.png"), full_page=True)
            admin.goto(url + "/admin/audit?actor=bea")
            assert {
                re.sub(r"\s+", " ", t)
                for t in admin.locator("#audit tbody td:nth-child(3)").all_inner_texts()
            } == {"bea"}
        finally:
            browser.close()
    assert verify(console["engine"], key=console["state"].auditor.key).ok
