"""The approval page in headless Chromium (issue 29): an approver sees every row, the totals per currency with
fees and balance, and the name check's findings (a mismatch, a partial match); Approve stays disabled until
each finding is acknowledged; then the run pays. The operator who started the run gets no Approve button and
a forged approval is refused."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.sandbox import SandboxConfig, SandboxServer

from tests.deployments.browser_harness import (
    ARGS,
    CHROMIUM,
    SHOTS,
    local_console,
    log_in,
    payouts_at,
    reload_until,
)
from tests.deployments.console_harness import PASSWORD, payroll_rows, serve_in_thread, write_sheet

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture
def console(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as emulator:
        app, launcher = local_console(tmp_path, emulator, monkeypatch, policy="0:1")
        users = app.state.console.users
        users.add("olu", "operator", PASSWORD)
        users.add("bea", "approver", PASSWORD)
        with serve_in_thread(app) as url:
            yield {"url": url, "tmp": tmp_path, "emulator": emulator}
        launcher.join(30)


def holder(emulator: SandboxServer, msisdn: str) -> str:
    """The account holder's name the emulator gives a number (its party lookup)."""
    env = emulator.env
    token = httpx.post(
        f"{env['PAYOPS_AUTH_URL']}/v1/oauth/token",
        data={
            "grant_type": "client_credentials",
            "client_id": env["PAYOPS_CLIENT_ID"],
            "client_secret": env["PAYOPS_CLIENT_SECRET"],
            "resource": env["PAYOPS_RESOURCE"],
        },
        timeout=10,
    ).json()["access_token"]
    r = httpx.get(
        f"{env['PAYOPS_BASE_URL']}/v1/party-lookups",
        params={"provider": "mtn", "msisdn": msisdn},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return str(r.json()["name"])


def test_an_approver_sees_the_rows_and_acknowledges_a_mismatch_before_approving(
    console: dict[str, Any],
) -> None:
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium") == CHROMIUM, "Debian chromium missing: make browser-deps"
    SHOTS.mkdir(exist_ok=True)
    url, emulator = console["url"], console["emulator"]
    rows = payroll_rows(3, prefix="APG")
    rows[0][1] = "Zed Nobody"  # not the holder: a mismatch
    rows[1][1] = holder(emulator, rows[1][6])  # the holder: a match
    rows[2][1] = holder(emulator, rows[2][6]).split()[0]  # the first name only: a partial match
    sheet = write_sheet(console["tmp"] / "names.xlsx", rows)
    before = payouts_at(emulator)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:

            def session(name: str) -> Any:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(30_000)
                page.goto(url + "/login")
                log_in(page, name, PASSWORD)
                page.wait_for_selector("#whoami")
                return page

            operator = session("olu")
            operator.set_input_files("#sheet", str(sheet))
            operator.wait_for_selector("#sample")
            assert "needs approval from 1 approver other" in operator.inner_text("#approvals-needed")
            operator.click("#submit")
            operator.wait_for_url("**/runs/*")
            run_url = operator.url
            run_id = run_url.rsplit("/", 1)[1]
            reload_until(operator, "#approval-totals", 90)
            assert operator.query_selector("#approve") is None  # the operator who started it: no button
            token = operator.get_attribute("input[name=csrf_token]", "value")
            forged = operator.request.post(
                f"{url}/runs/{run_id}/approval",
                form={"csrf_token": token, "decision": "approve", "acknowledge": "mismatch"},
            )
            assert forged.status == 403

            bea = session("bea")
            bea.goto(url + "/runs")
            assert "waits for 1 approval (not olu): GHS 34.50" in bea.inner_text("#notices")
            bea.goto(run_url)
            totals = bea.inner_text("#approval-totals")
            assert "GHS 34.50" in totals and "GHS" in totals and "Balance after" in totals
            assert "Time left:" in bea.inner_text("#time-left")
            table = bea.inner_text("#approval-rows")
            for r in rows:
                assert r[0] in table and r[1] in table, r
            assert "mismatch" in table and "partial" in table and "match" in table
            assert "row 2" in bea.inner_text("#finding-mismatch")  # sheet row 2: the first data row
            assert bea.is_disabled("#approve")
            bea.click("#filter-look")
            look = bea.inner_text("#approval-rows")
            assert "APG-00000" in look and "APG-00002" in look and "APG-00001" not in look  # no match shown
            bea.screenshot(path=str(SHOTS / "20-approval-page.png"), full_page=True)
            bea.check("#ack-mismatch")
            assert bea.is_disabled("#approve")  # the partial match is not acknowledged yet
            bea.check("#ack-partial")
            assert bea.is_enabled("#approve")
            bea.fill("#comment", "Zed Nobody is the new name of row 2's payee")
            bea.click("#approve")
            reload_until(bea, "#outcome", 120)
            assert bea.inner_text("#outcome") == "completed"
            assert "by bea" in bea.inner_text("#approval-result")
            bea.screenshot(path=str(SHOTS / "21-approved.png"), full_page=True)
        finally:
            browser.close()
    assert payouts_at(emulator) == before + 3
