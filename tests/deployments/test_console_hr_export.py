"""A real HR payroll export pays through the console without editing the file (issue 46): its headers ("Full
Name", "Phone Number", "Net Pay (GHS)", "Bank/Network", "Employee ID") are understood, the currency is read
from the amount header, "+233 24 ..." numbers are paid, the payees the provider refuses are said in words
with the next step, and every page fits a 1280 px window. Headless Debian Chromium, local console."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from openpyxl import load_workbook
from payops.connectors.payments.failure_words import failure_words
from payops.sandbox import SandboxServer

from tests.deployments.browser_harness import (
    ARGS,
    CHROMIUM,
    SHOTS,
    acknowledge_all,
    log_in,
    overflowing,
    payouts_at,
    reload_until,
)
from tests.deployments.console_harness import PASSWORD
from tests.deployments.hr_export import hr_export, hr_rows, hr_total

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_an_hr_export_is_paid_from_the_console_as_exported(
    console: dict[str, Any], emulator: SandboxServer
) -> None:
    from playwright.sync_api import sync_playwright

    url, tmp = console["url"], console["tmp"]
    rows = hr_rows(12, prefix="HRB", failing=("0001", "0002"), mismatched=(5, 9))
    sheet = hr_export(tmp / "november-payroll.xlsx", rows)
    before = payouts_at(emulator)
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(
                viewport={"width": 1280, "height": 900}, accept_downloads=True
            ).new_page()
            page.set_default_timeout(30_000)
            page.goto(url + "/login")
            log_in(page, "olu", PASSWORD)
            page.wait_for_selector("#upload-form")
            page.set_input_files("#sheet", str(sheet))
            page.wait_for_selector("#sample")

            # Understood as exported: every row valid, GHS from the header, the guesses shown to correct.
            assert page.inner_text("#counts").startswith("12 rows: 12 valid, 0 with errors")
            assert f"GHS {hr_total(rows):,.2f}" in page.inner_text("#counts")
            assert "GHS (from the header 'Net Pay (GHS)')" in page.inner_text("#sheet-currency-note")
            assert "Employee ID" in page.inner_text("#ignored-columns")
            guessed = {f: page.input_value(f"#map-{f}") for f in ("amount", "provider", "destination")}
            assert guessed == {
                "amount": "Net Pay (GHS)",
                "provider": "Bank/Network",
                "destination": "Phone Number",
            }
            assert page.input_value("#map-payee_name") == "Full Name"
            assert page.input_value("#sheet-currency") == ""  # "from the header: GHS"
            assert not overflowing(page), overflowing(page)
            page.screenshot(path=str(SHOTS / "hr-01-preview.png"), full_page=True)
            # The preview has its own address: a reload shows it again, not "Method Not Allowed" (issue 47).
            assert "/uploads/" in page.url
            page.reload()
            assert page.inner_text("#counts").startswith("12 rows: 12 valid, 0 with errors")
            if page.query_selector("input[name=require_approval]") is not None:
                page.check("input[name=require_approval]")  # the policy asks none: have one anyway
            page.click("#submit")
            page.wait_for_url("**/runs/*")
            run_url = page.url

            # An approver sees the two names that differ from the account holder, acknowledges, approves.
            reload_until(page, "#approval", 90)
            approver = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            approver.set_default_timeout(30_000)
            approver.goto(url + "/login")
            log_in(approver, "bea", PASSWORD)
            approver.goto(run_url)
            assert "Kwesi Appiah-Danquah" in approver.content()
            acknowledge_all(approver)
            assert not overflowing(approver), overflowing(approver)
            approver.click("#approve")

            reload_until(page, "#outcome", 120)
            assert page.inner_text("#state") == "Completed with failures"
            assert "delivered 10" in page.inner_text("#summary") and "failed 2" in page.inner_text("#summary")
            # The refused payees in words with the next step; the codes stay out of the text people read.
            rows_text = page.inner_text("#attention-rows")
            for code in ("insufficient_funds_at_provider", "account_not_found"):
                words, next_step = failure_words(code)
                assert words in rows_text and next_step in rows_text
                assert code not in rows_text
            assert not overflowing(page), overflowing(page)
            page.screenshot(path=str(SHOTS / "hr-02-completed.png"), full_page=True)

            # One name: the reports are listed and saved under the run's name, not its sheet-hash label.
            listed = page.inner_text("#reports")
            assert "november-payroll.xlsx" in listed and "sheet-" not in listed
            link = page.query_selector("#reports a:text-is('november-payroll.xlsx')")
            with page.expect_download() as info:
                link.click()
            assert info.value.suggested_filename == "november-payroll.xlsx"
            saved = tmp / "saved.xlsx"
            info.value.save_as(saved)
        finally:
            browser.close()
    # Finance sums the sheet's own "Net Pay (GHS)" column in the results and gets the sheet's total.
    results = list(load_workbook(saved)["results"].iter_rows(values_only=True))
    net_pay = [r[results[0].index("Net Pay (GHS)")] for r in results[1:-1]]
    assert all(isinstance(v, (int, float)) for v in net_pay), net_pay
    assert round(sum(Decimal(str(v)) for v in net_pay), 2) == hr_total(rows)
    # and the totals row under the rows says it (issue 47)
    assert round(Decimal(str(results[-1][results[0].index("Net Pay (GHS)")])), 2) == hr_total(rows)
    assert payouts_at(emulator) == before + 12  # every row sent once; two failed at the provider
