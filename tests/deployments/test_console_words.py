"""The console speaks to people (issue 46): no page shows a command-line flag or a repository path, a run has
one name on every page (its retries named after it, linked both ways), the approval option says what the
policy requires, amounts and counts are written one way."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from payops.connectors.payments.failure_words import FAILURE_WORDS, failure_words
from payops.connectors.payments.models import PAYOUT_STATUSES
from payops.deployments.console.errors import console_words, refusal_words
from payops.deployments.console.formats import count, money
from payops.sandbox import SandboxServer
from payops.store.approvals import state_policy
from payops.tasks.intake.columns import ColumnsUnmatched, map_columns
from payops.tasks.payouts.retry_sheet import retry_base

from tests.deployments.browser_harness import local_console
from tests.deployments.console_harness import (
    PASSWORD,
    bad_sheet,
    payroll_rows,
    serve_in_thread,
    write_sheet,
)
from tests.deployments.test_console_security import (  # noqa: F401 - fixtures: the launcher, the approval key
    FakeLauncher,
    approval_key,
    launcher,
    operator,
    upload,
)

FAILURE_CODES = sorted(c for c in FAILURE_WORDS if "_" in c and c not in PAYOUT_STATUSES)
"""Machine codes (a status such as in_review is shown as the service names it)."""
CLI_OR_REPO = re.compile(r"(?<![\w-])--[A-Za-z]|\bdocs/")
"""What no console page may show: a command-line flag or a path in the repository's docs."""


def intake_refusal(headers: list[str]) -> ColumnsUnmatched:
    with pytest.raises(ColumnsUnmatched) as caught:
        map_columns(headers)
    return caught.value


def test_console_words_leave_out_the_command_lines_hints_and_keep_the_reason() -> None:
    missing = intake_refusal(["who", "how much"])
    assert CLI_OR_REPO.search(str(missing))  # the intake writes for the command line too
    words = refusal_words(missing)
    assert not CLI_OR_REPO.search(words)
    assert words.startswith("missing required columns: amount, currency, provider, destination")
    assert words.endswith("choose below which column holds the amount, currency, provider, destination")
    twice = console_words(str(intake_refusal(["amount", "Amount ", "currency", "provider", "destination"])))
    assert twice == "columns 'amount' and 'Amount ' both mean amount; keep only one"
    no_names = 'no payee-name column (ignored columns: x); name it (--column "H=payee_name", or column_map)'
    assert console_words(no_names) == "no payee-name column (ignored columns: x); name it"
    assert console_words("see docs/intake.md") == "this cannot be done from the console"
    assert console_words("a total of 1,000.00 -- or more") == "a total of 1,000.00 -- or more"


def test_amounts_and_counts_are_written_one_way() -> None:
    assert money(Decimal("1009785.5")) == "1,009,785.50"
    assert money("2007.01", "GHS") == "GHS 2,007.01"
    assert money("twelve", "GHS") == "GHS twelve"  # a sheet's typo, shown as written
    with pytest.raises(TypeError):
        money(2007.01, "GHS")  # type: ignore[arg-type]
    assert [count(1, "row"), count(2, "row"), count(1200, "payout")] == ["1 row", "2 rows", "1,200 payouts"]


def test_a_retry_is_named_after_the_run_and_fits_a_label() -> None:
    assert retry_base("payroll-nov-2026-v3") == "payroll-nov-2026-v3"
    assert retry_base("payroll-nov-2026-v3-retry2") == "payroll-nov-2026-v3-retry2"
    long = retry_base("x" * 80 + "-retry12")
    assert long.endswith("-retry12") and len(long) <= 64 - len("-retry9999") + len("-retry12")


def test_the_approval_option_says_what_the_policy_requires(
    tmp_path: Path,
    launcher: FakeLauncher,  # noqa: F811
) -> None:
    client, token = operator(tmp_path, launcher)
    engine = client.app.state.console.engine
    sheet = write_sheet(tmp_path / "payroll.xlsx", payroll_rows(3, prefix="POL"))
    state_policy(engine, "GHS 0:2")
    page = upload(client, token, sheet)
    assert page.status_code == 200
    needed = re.search(r'<p id="approvals-needed">(.*?)</p>', page.text).group(1)
    assert "needs approval from 2 approvers other than you under the approval policy" in needed
    assert 'name="require_approval"' not in page.text  # ticking it could not raise what the policy asks
    state_policy(engine, "GHS 1000:1")  # the sheet pays GHS 34.50: below the policy's first tier
    page = upload(client, token, sheet)
    assert 'id="approvals-needed"' not in page.text
    assert "Also pause for approval (the policy does not require it for this amount)" in page.text
    assert "GHS 10.50" in page.text and "Pay 3 rows" in page.text


# -- every page, on a real run and its retry ----------------------------------------------------------------


@pytest.fixture
def served(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """A local console whose policy asks one approver for any GHS run; operator olu, approver bea, admin
    ada."""
    app, local = local_console(tmp_path, emulator, monkeypatch, policy="GHS 0:1")
    for name, role in [("olu", "operator"), ("bea", "approver"), ("ada", "admin")]:
        app.state.console.users.add(name, role, PASSWORD)
    with serve_in_thread(app) as url:
        yield {"url": url}
    local.join(30)


def token(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def logged_in(url: str, name: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    login = {"username": name, "password": PASSWORD, "csrf_token": token(client.get("/login").text)}
    assert client.post("/login", data=login).status_code == 303
    return client


def run_page_when(client: httpx.Client, path: str, marker: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    while marker not in (page := client.get(path).text):
        assert time.monotonic() < deadline, f"{marker} never on {path}: {page[-1500:]}"
        time.sleep(1)
    return page


def send(client: httpx.Client, page: httpx.Response) -> str:
    """Submit a preview; the run's page path."""
    assert page.status_code == 200, page.text[-1500:]
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', page.text).group(1)
    started = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token(page.text)})
    assert started.status_code == 303, started.text[-1500:]
    return started.headers["location"]


def approve(approver: httpx.Client, path: str) -> None:
    page = run_page_when(approver, path, 'id="approval-form"', 90)
    findings = re.findall(r'name="acknowledge" value="([^"]+)"', page)
    form = {"csrf_token": token(page), "decision": "approve", "comment": "checked", "acknowledge": findings}
    assert approver.post(f"{path}/approval", data=form).status_code == 303


def title(page: str) -> str:
    return re.search(r"<h1>Run <code>([^<]+)</code></h1>", page).group(1)


def test_every_page_speaks_console_words_and_names_a_run_once(
    served: dict[str, Any], emulator: SandboxServer, tmp_path: Path
) -> None:
    url = served["url"]
    olu, bea, ada = (logged_in(url, n) for n in ("olu", "bea", "ada"))
    pages: dict[str, str] = {"login": httpx.get(url + "/login").text, "upload": olu.get("/").text}

    def sheet_upload(path: Path) -> httpx.Response:
        with path.open("rb") as fh:
            return olu.post("/upload", data={"csrf_token": token(pages["upload"])}, files={"sheet": fh})

    unmapped = sheet_upload(write_sheet(tmp_path / "export.xlsx", [["Ama", "10.00"]], ["who", "how much"]))
    assert unmapped.status_code == 422 and 'id="mapping-form"' in unmapped.text
    assert "choose below which column holds the amount" in unmapped.text
    pages["refusal and mapping needed"] = unmapped.text
    pages["sheet with errors"] = sheet_upload(bad_sheet(tmp_path / "bad.xlsx")).text
    rows = payroll_rows(3, prefix="WRD", specials={1: "0002"})  # row 3 fails at the provider
    rows[0][2] = "2007.01"
    preview = sheet_upload(write_sheet(tmp_path / "payroll-nov-2026-v3.xlsx", rows))
    pages["preview"] = preview.text
    assert "needs approval from 1 approver other than you" in preview.text
    assert "GHS 2,007.01" in preview.text and "Total GHS 2,031.01." in preview.text

    run_path = send(olu, preview)
    approve(bea, run_path)
    pages["notices"] = bea.get("/notices").text
    assert ">payroll-nov-2026-v3</a>" in pages["notices"] and "sheet-" not in pages["notices"]
    pages["run"] = run_page_when(olu, run_path, 'id="outcome"')
    assert title(pages["run"]) == "payroll-nov-2026-v3"
    assert "<li>Sheet total GHS 2,031.01</li>" in pages["run"]
    assert "GHS 11.50" in pages["run"]  # the failed row
    assert '<td class="not-paid">GHS 11.50 (1 payout)</td>' in pages["run"]  # what did not move (issue 47)

    assert 'id="retry-form"' in pages["run"]  # the operator may retry the failed row...
    assert 'id="retry-form"' not in bea.get(run_path).text  # ...the approver is not offered it (issue 47)
    retry = olu.post(f"{run_path}/retry", data={"csrf_token": token(pages["run"])})
    pages["retry preview"] = retry.text
    assert "Run name: <code>payroll-nov-2026-v3-retry1</code>" in retry.text
    assert f'<a href="{run_path}" id="retry-of">run payroll-nov-2026-v3</a>' in retry.text
    retry_path = send(olu, retry)
    approve(bea, retry_path)
    pages["retry run"] = run_page_when(olu, retry_path, 'id="outcome"')
    assert title(pages["retry run"]) == "payroll-nov-2026-v3-retry1"
    assert f'Pays the failed rows of run <a href="{run_path}">payroll-nov-2026-v3</a>' in pages["retry run"]
    pages["run"] = olu.get(run_path).text
    assert f'Retried as <a href="{retry_path}">payroll-nov-2026-v3-retry1</a>' in pages["run"]

    again = olu.post(f"{run_path}/retry", data={"csrf_token": token(pages["run"])})
    assert again.status_code == 409
    assert f'<a href="{retry_path}">payroll-nov-2026-v3-retry1</a>' in again.text
    assert '<a href="/runs">Runs</a>' in again.text and "See Runs" not in again.text
    pages["refused retry"] = again.text
    pages["runs"] = bea.get("/runs").text
    names = re.findall(r'<a href="/runs/[^"]+">([^<]+)</a>', pages["runs"])
    assert {"payroll-nov-2026-v3", "payroll-nov-2026-v3-retry1"} <= set(names)
    pages["no such run"] = olu.get(f"/runs/{uuid4()}").text
    for path in ("/admin/users", "/admin/audit", "/admin/rules"):
        pages[path] = ada.get(path).text

    for name, page in pages.items():
        found = CLI_OR_REPO.search(page)
        assert found is None, f"{name}: {page[max(found.start() - 200, 0) : found.end() + 100]}"
        if name == "/admin/audit":
            continue  # the audit trail keeps each entry's details as recorded (tamper-evident), codes and all
        shown = re.sub(r"<[^>]+>", " ", page)  # what a person reads (a code may sit in a tooltip)
        bare = [c for c in FAILURE_CODES if re.search(rf"(?<![\w-]){c}(?![\w-])", shown)]
        assert not bare, f"{name} shows failure codes without their words: {bare}"
    words, next_step = failure_words("account_not_found")  # row 3's payee, on the run and the retry preview
    for name in ("run", "retry preview"):
        assert words in pages[name] and next_step in pages[name], name
