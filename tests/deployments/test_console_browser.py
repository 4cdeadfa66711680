"""The console in headless Debian Chromium: log in, a sheet with errors is refused with its errors shown and
nothing runs; a good sheet is paid (after approval) against the emulator and its report downloads.

Local single-process mode: the console runs the payout flow in a thread, on the session's Prefect test server.
Upload, preview, approval and run pages at 1280 px wide: nothing reaches past its card or the window.
Screenshots go to tests/deployments/screenshots/ (git-ignored).
"""

from __future__ import annotations

import shutil
from typing import Any

import httpx
import pytest
from openpyxl import load_workbook
from payops.sandbox import SandboxServer

from tests.deployments.browser_harness import (
    ARGS,
    CHROMIUM,
    SHOTS,
    VIEWPORT,
    acknowledge_all,
    console_runs,
    log_in,
    overflowing,
    payouts_at,
    reload_until,
)
from tests.deployments.console_harness import PASSWORD, bad_sheet, good_sheet

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_login_refuse_bad_sheet_pay_good_sheet_download_report(
    console: dict[str, Any], emulator: SandboxServer
) -> None:
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium") == CHROMIUM, "Debian chromium missing: make browser-deps"
    SHOTS.mkdir(exist_ok=True)
    url, tmp = console["url"], console["tmp"]
    runs_before = len(console_runs())
    payouts_before = payouts_at(emulator)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(accept_downloads=True, viewport=VIEWPORT).new_page()
            page.set_default_timeout(30_000)

            page.goto(url + "/")
            assert page.url.endswith("/login")
            log_in(page, "olu", "wrong password")
            assert page.is_visible("#login-error")
            log_in(page, "olu", PASSWORD)
            page.wait_for_selector("#upload-form")
            assert PASSWORD not in page.content()
            page.screenshot(path=str(SHOTS / "01-upload.png"), full_page=True)
            assert overflowing(page) == []

            # A sheet with errors: choosing the file sends it (upload.js); errors shown, no submit button.
            page.set_input_files("#sheet", str(bad_sheet(tmp / "bad.xlsx")))
            page.wait_for_selector("#errors")
            cells = [
                [c.inner_text() for c in row.query_selector_all("td")]
                for row in page.query_selector_all("#errors tbody tr")
            ]
            assert ["3", "amount", "twelve"] == cells[0][:3] and cells[0][3]
            assert cells[1][:3] == ["4", "provider", "pigeon-post"]
            assert page.query_selector("#submit") is None
            page.screenshot(path=str(SHOTS / "02-errors.png"), full_page=True)
            assert len(console_runs()) == runs_before and payouts_at(emulator) == payouts_before

            # A good sheet: preview, pay with approval, approve, wait until completed.
            page.goto(url + "/")
            page.set_input_files("#sheet", str(good_sheet(tmp / "good.xlsx")))
            page.wait_for_selector("#sample")
            assert page.inner_text("#counts").startswith("6 rows: 6 valid")
            page.check("input[name=require_approval]")
            page.screenshot(path=str(SHOTS / "03-preview.png"), full_page=True)
            assert overflowing(page) == []
            page.click("#submit")
            page.wait_for_url("**/runs/*")
            run_url = page.url
            reload_until(page, "#approval", 90)
            assert payouts_at(emulator) == payouts_before  # nothing sent before approval
            approver = browser.new_context(viewport=VIEWPORT).new_page()
            approver.set_default_timeout(30_000)
            approver.goto(url + "/login")
            log_in(approver, "bea", PASSWORD)
            approver.goto(run_url)
            approver.screenshot(path=str(SHOTS / "04-approval.png"), full_page=True)
            assert overflowing(approver) == []
            approver.fill("#comment", "checked by the browser test")
            assert acknowledge_all(approver) == ["no_name_column"]  # the sheet names no payees
            approver.click("#approve")
            reload_until(page, "#outcome", 120)
            assert page.inner_text("#outcome") == "completed"
            assert page.inner_text("#state") == "Completed with failures"  # one payout failed
            amber = "rgb(255, 216, 168)"  # .state-warning: a run with failures is never green
            assert page.eval_on_selector("#state", "e => getComputedStyle(e).backgroundColor") == amber
            assert "delivered 5" in page.inner_text("#summary") and "failed 1" in page.inner_text("#summary")
            page.screenshot(path=str(SHOTS / "05-completed.png"), full_page=True)
            assert overflowing(page) == []
            assert payouts_at(emulator) == payouts_before + 6

            link = page.query_selector("#reports a[href$='.xlsx']:not([href$='-validation.xlsx'])")
            assert link is not None
            report_href = str(link.get_attribute("href"))
            with page.expect_download() as info:
                link.click()
            saved = tmp / "downloaded.xlsx"
            info.value.save_as(saved)
            rows = list(load_workbook(saved)["results"].iter_rows(values_only=True))
            head = rows[0]
            statuses = sorted(r[head.index("Payout status")] for r in rows[1:-1])  # not the totals row
            assert statuses == ["delivered"] * 5 + ["failed"]

            page.goto(url + "/runs")
            assert run_url.rsplit("/", 1)[-1] in page.inner_html("#runs")
            page.screenshot(path=str(SHOTS / "06-runs.png"), full_page=True)

            # Downloads are confined to the run's own report files.
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            with httpx.Client(base_url=url, cookies=cookies) as client:
                for name in [
                    "..%2F..%2F..%2Fetc%2Fpasswd",
                    "%2Fetc%2Fpasswd",
                    "%2E%2E",
                    "upload.json",
                    "bad.xlsx",
                    "..%2Fgood.xlsx",
                ]:
                    r = client.get(f"{run_url.removeprefix(url)}/reports/{name}")
                    assert r.status_code == 404 and "root:" not in r.text, name
            anonymous = httpx.get(url + report_href, follow_redirects=False)
            assert anonymous.status_code == 303
        finally:
            browser.close()
    paid = run_url.rsplit("/", 1)[-1]  # this test's run (the session's server holds other files' runs too)
    assert [r.state.type.value for r in console_runs() if str(r.id) == paid] == ["COMPLETED"]
