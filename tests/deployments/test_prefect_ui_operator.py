"""Acceptance of issue 23: Prefect's own UI, served by ``payops serve --sandbox``, as an operator uses it.

In headless Debian Chromium, against the all-in-one (Prefect server + UI, emulator, console, served
deployments): the operator logs in to Prefect's UI with serve's Prefect login (the home's prefect-auth file);
a payout run of the example sheet is started from the payout deployment's Custom run form with approval
required. While it is paused, the Resume dialog shows the sheet's totals and points approvers to the
console; it can only reject: a rejection in the dialog ends non-green ("Rejected"), and unticking "Reject this
run" without the console's signed approvals leaves the run waiting, nothing sent to the emulator. A run
approved in the console by a named approver ends Completed; the report link of its summary artifact opens and
downloads the report file; the Event Feed shows the ``payments.*`` events the emulator's webhooks brought in.

Screenshots of every step go to tests/deployments/screenshots/prefect-ui/ (git-ignored); their paths are
printed (``pytest -s``). ``payops serve`` runs in its own process group; it and every process under it are
stopped at the end (tests/deployments/serve_harness.py).
"""

from __future__ import annotations

import json
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from openpyxl import load_workbook
from payops.deployments.serve import ROOT

from tests.deployments.browser_harness import ARGS, CHROMIUM, SHOTS, acknowledge_all, log_in
from tests.deployments.console_harness import PASSWORD
from tests.deployments.prefect_ui import log_in as log_in_to_prefect
from tests.deployments.prefect_ui import (
    open_flow_run,
    open_resume_dialog,
    reload_until_text,
    resume_description,
    start_custom_run,
    state_badge,
)
from tests.deployments.serve_harness import AllInOne, all_in_one

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(420)]

SHEET = ROOT / "examples" / "payouts-demo.xlsx"
SHOT_DIR = SHOTS / "prefect-ui"
FINAL = {"COMPLETED", "CANCELLED", "FAILED", "CRASHED"}


def sheet_totals(path: Path) -> tuple[int, Decimal]:
    """Rows and total amount of the example sheet, read independently of payops' intake."""
    rows = list(load_workbook(path, read_only=True)["payouts"].iter_rows(values_only=True))
    amount = [str(h).strip().lower() for h in rows[0]].index("amount")
    body = [r for r in rows[1:] if any(c not in (None, "") for c in r)]
    return len(body), sum((Decimal(str(r[amount])) for r in body), Decimal(0))


def grouped(amount: Decimal) -> re.Pattern[str]:
    """``amount`` with two decimals, thousands grouped by commas or not (the dialog's markdown decides)."""
    whole, cents = f"{amount:.2f}".split(".")
    groups = f"{int(whole):,}".replace(",", ",?")
    return re.compile(rf"(?<![\d.,]){groups}\.{cents}(?!\d)")


@pytest.fixture
def served(tmp_path: Path) -> Any:
    with all_in_one(tmp_path, {"bea": "approver"}) as running:
        yield running


def test_an_operator_pays_a_sheet_from_prefects_own_ui(served: AllInOne, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium") == CHROMIUM, "Debian chromium missing: make browser-deps"
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    for old in SHOT_DIR.glob("*.png"):  # this run's screenshots only
        old.unlink()
    shots: list[Path] = []
    rows, total = sheet_totals(SHEET)
    deployment = served.deployment_id("payout-spreadsheet")

    def shot(page: Any, name: str) -> None:
        path = SHOT_DIR / f"{len(shots) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        shots.append(path)
        print(f"screenshot: {path}")

    def start_with_approval(page: Any, label: str) -> str:
        def fill(p: Any) -> None:
            p.get_by_label("Source", exact=True).fill(str(SHEET))
            p.get_by_label(re.compile(r"^Label", re.I)).fill(label)
            p.get_by_label(re.compile(r"^Require approval", re.I)).click()
            shot(p, f"{label}-custom-run-form")

        return start_custom_run(page, served.ui, deployment, fill)

    def paused(page: Any, run_id: str, label: str) -> None:
        """Wait until the run is paused for approval; its page shows it, under the run's label."""
        served.wait_for(
            lambda: served.flow_run(run_id)["state_type"] in {"PAUSED", *FINAL}, 120, f"{label} paused"
        )
        open_flow_run(page, served.ui, run_id)
        assert state_badge(page).inner_text().strip() == "Paused", served.flow_run(run_id)["state"]
        assert served.flow_run(run_id)["name"] == label, "the run is named after its label"
        assert page.get_by_text(label, exact=True).first.is_visible()

    def final_state(page: Any, run_id: str, label: str) -> tuple[str, str, str]:
        """Wait until the run is final; its page's badge (text, class) and the API's state type."""
        run = served.wait_for(
            lambda: (r := served.flow_run(run_id))["state_type"] in FINAL and r, 180, f"{label} final"
        )
        open_flow_run(page, served.ui, run_id)
        page.wait_for_load_state("networkidle")
        shot(page, f"{label}-final")
        badge = state_badge(page)
        return badge.inner_text().strip(), str(badge.get_attribute("class")), run["state_type"]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page = context.new_page()
            page.set_default_timeout(30_000)

            # Prefect's UI asks for serve's Prefect login (the home's prefect-auth file) before anything.
            log_in_to_prefect(page, served.ui, served.auth_string)
            shot(page, "prefect-logged-in")

            # Three runs of the example sheet from the Custom run form, approval required (started together:
            # each pauses after its pre-flight while the previous one is handled).
            rejected = start_with_approval(page, "ui-reject")
            unsigned = start_with_approval(page, "ui-unsigned")
            approved = start_with_approval(page, "ui-approve")

            # 1. Rejected in the Resume dialog, after reading the totals there: non-green, nothing sent.
            paused(page, rejected, "ui-reject")
            dialog = open_resume_dialog(page)
            description = resume_description(dialog)
            text = description.inner_text()
            assert grouped(total).search(text), f"total {total} not in the Resume dialog:\n{text}"
            assert re.search(rf"\b{rows}\b", text), f"{rows} rows not in the Resume dialog:\n{text}"
            assert re.search(r"fee", text, re.I), text
            assert re.search(r"\b\d+ mismatch", text, re.I), f"no name-check count in the dialog:\n{text}"
            assert points_to_console(text, served.console, rejected), text
            shot(page, "ui-reject-resume-dialog")
            resume_with(dialog, approve=False)
            name, css, kind = final_state(page, rejected, "ui-reject")
            assert (name, green(css)) == ("Rejected", False) and kind != "COMPLETED", (name, kind)
            assert served.payouts_posted() == 0
            why = served.artifact_text("ui-reject-summary")
            assert re.search(r"\brejected\b", why, re.I), f"the summary does not say why:\n{why}"

            # 2. The dialog offers no approve that cannot work: unticking "Reject this run" only makes the run
            # look for the console's signed approvals; there are none, so it keeps waiting, nothing sent.
            paused(page, unsigned, "ui-unsigned")
            dialog = open_resume_dialog(page)
            assert points_to_console(resume_description(dialog).inner_text(), served.console, unsigned)
            shot(page, "ui-unsigned-resume-dialog")
            before = served.flow_run(unsigned)["state"]["id"]
            resume_with(dialog, approve=True)

            def paused_again() -> bool:
                run = served.flow_run(unsigned)
                return run["state_type"] == "PAUSED" and run["state"]["id"] != before

            served.wait_for(paused_again, 60, "ui-unsigned paused again")  # ... it waits again
            paused(page, unsigned, "ui-unsigned")
            assert served.payouts_posted() == 0, "an unsigned resume sent payouts"
            resume_with(open_resume_dialog(page), approve=False)
            name, css, kind = final_state(page, unsigned, "ui-unsigned")
            assert (name, green(css)) == ("Rejected", False) and kind != "COMPLETED", (name, kind)
            assert served.payouts_posted() == 0

            # 3. Approved by a named approver in the console (where the dialog points): paid, Completed.
            paused(page, approved, "ui-approve")
            dialog = open_resume_dialog(page)
            console_url = points_to_console(resume_description(dialog).inner_text(), served.console, approved)
            assert console_url, "the dialog does not say where to approve"
            dialog.get_by_role("button", name="Cancel").click()
            page.goto(console_url)
            if "/login" in page.url:
                log_in(page, "bea", PASSWORD)
                page.goto(console_url)
            page.wait_for_selector("#approval")
            page.fill("#comment", "checked in the Prefect UI acceptance test")
            assert "mismatch" in acknowledge_all(page)  # the example sheet names two payees wrongly
            shot(page, "ui-approve-console-approval")
            with page.expect_navigation():  # the console answers with its run page; let it land first
                page.click("#approve")
            name, css, kind = final_state(page, approved, "ui-approve")
            assert kind == "COMPLETED" and green(css), (name, kind)
            assert served.payouts_posted() == rows

            # The summary artifact's report link opens and downloads the report the run wrote.
            page.get_by_role("tab", name="Artifacts").click()
            page.get_by_role("link", name=re.compile(r"ui-approve-summary")).click()
            page.wait_for_url(re.compile(r"/artifacts/key/"), wait_until="commit")
            page.locator("a[href*='/artifacts/artifact/']").first.click()
            page.wait_for_url(re.compile(r"/artifacts/artifact/"), wait_until="commit")
            page.get_by_role("link", name=re.compile(r"\.xlsx$")).first.wait_for()
            shot(page, "ui-approve-summary-artifact")
            hrefs = [
                str(a.get_attribute("href"))
                for a in page.get_by_role("link", name=re.compile(r"\.(xlsx|csv)$")).all()
            ]
            assert hrefs and all(h.startswith(served.console) for h in hrefs), hrefs
            xlsx = next(h for h in hrefs if h.endswith(".xlsx") and not h.endswith("-validation.xlsx"))
            response = context.request.get(xlsx)
            assert response.status == 200, (xlsx, response.status)
            on_disk = [p for p in served.payops_home.rglob(Path(xlsx).name) if p.is_file()]
            assert len(on_disk) == 1, on_disk
            assert response.body() == on_disk[0].read_bytes()
            downloaded = tmp_path / "report.xlsx"
            downloaded.write_bytes(response.body())
            statuses = column(downloaded, "Payout status")
            assert len(statuses) == rows and "delivered" in statuses
            # The example sheet fails a few rows on purpose: the state's name says so.
            assert name == ("Completed with failures" if "failed" in statuses else "Completed"), name

            # The Event Feed, filtered to the payments.* types, shows what the webhooks brought in (the relay
            # posts them within seconds; 90 s ran out once on a CI machine loaded 7 deep).
            try:
                served.wait_for(served.payment_events, 150, "payments.payout.* events in Prefect")
            except AssertionError as missing:  # say where the relayed events stopped (a rare CI failure)
                inbox = served.payops("webhooks", "status", "--json")
                raise AssertionError(f"{missing}\nwebhook inbox: {inbox.stdout}{inbox.stderr}") from None
            feed = f"{served.ui}/events?events=" + quote(json.dumps(["payments.*"]))
            seen = reload_until_text(page, feed, re.compile(r"^payments\.payout\.[a-z_]+$"), 60)
            shot(page, "event-feed")
            assert seen.startswith("payments.payout."), seen
        finally:
            browser.close()
    print("screenshots:\n" + "\n".join(str(p) for p in shots))


def points_to_console(text: str, console: str, run_id: str) -> str | None:
    """The console page of ``run_id`` the Resume dialog names as the place to approve (with `payops approve`
    as the other way), or None."""
    url = f"{console}/runs/{run_id}"
    return url if url in text and "payops approve" in text else None


def green(css: str) -> bool:
    """A state badge in Completed's colours (StateBadge: ``bg-state-completed-100``)."""
    return "state-completed" in css


def resume_with(dialog: Any, *, approve: bool) -> None:
    """Submit the Resume dialog: "Reject this run" is ticked by default (the dialog can only reject);
    ``approve`` unticks it, which makes the run look for the console's signed approvals."""
    box = dialog.get_by_label(re.compile(r"^Reject this run"))
    if approve:
        box.click()
    for attempt in range(3):  # Prefect's SQLite server can answer "database is locked": the dialog then stays
        dialog.get_by_role("button", name="Resume").click()  # open with an error, and a person clicks again
        try:
            dialog.wait_for(state="hidden", timeout=15_000)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: try the click again
            if attempt == 2:
                raise


def column(path: Path, header: str) -> list[Any]:
    """One column of a payout report's ``results`` sheet (its rows, not the totals row under them)."""
    rows = list(load_workbook(path, read_only=True)["results"].iter_rows(values_only=True))
    index = list(rows[0]).index(header)
    return [r[index] for r in rows[1:-1]]
