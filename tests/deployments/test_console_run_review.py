"""The console's run page shows the rows needing a person first, a chart of outcomes, and **Retry failed
rows**, which pays exactly the failed rows once however often it is clicked (real runs on the emulator)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.deployments.console.run_review import PAGE_SIZE, attention, outcome_chart
from payops.sandbox import SandboxServer

from tests.deployments.console_harness import PASSWORD, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(console: dict[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console["url"], timeout=30) as http:
        yield http


def _token(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


def _login(client: httpx.Client) -> str:
    token = _token(client.get("/login").text)
    login = {"username": "olu", "password": PASSWORD, "csrf_token": token}
    assert client.post("/login", data=login).status_code == 303
    return _token(client.get("/").text)


def _submit(client: httpx.Client, token: str, preview: httpx.Response) -> str:
    assert preview.status_code == 200, preview.text[-2000:]
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', preview.text).group(1)
    started = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token})
    assert started.status_code == 303
    return started.headers["location"]


def _final_page(client: httpx.Client, run_path: str) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        page = client.get(run_path).text
        if 'id="outcome"' in page:
            return page
        time.sleep(1)
    raise AssertionError(f"{run_path} did not finish")


def _payouts(emulator: SandboxServer) -> int:
    stats = httpx.get(f"{emulator.base_url}/_sandbox/stats", timeout=10).json()
    return stats["businesses"]["demo"]["test"]["payouts"]


def test_run_page_shows_failed_rows_first_and_retry_pays_them_once(
    client: httpx.Client, emulator: SandboxServer, tmp_path: Path
) -> None:
    token = _login(client)
    rows = payroll_rows(6, prefix="CRT", specials={1: "0001", 3: "0002"})  # rows 3 and 5 fail
    sheet = write_sheet(tmp_path / "april.xlsx", rows)
    with sheet.open("rb") as fh:
        preview = client.post("/upload", data={"csrf_token": token}, files={"sheet": ("april.xlsx", fh)})
    run_path = _submit(client, token, preview)
    page = _final_page(client, run_path)

    # What needs a person comes before the totals, row by row with payee, amount and reason.
    assert page.index('id="attention"') < page.index('id="outcome"')
    start = page.index('id="attention-rows"')
    table = page[start : page.index("</table>", start)]
    rows = re.findall(r"<tr class=\"kind-(\w+)\"><td>(\d+)</td>", table)
    assert rows == [("failed", "3"), ("failed", "5")]
    # Each failure in words with the next step (tasks/reports/attention.py); the code only as a tooltip.
    assert "The provider could not fund the payout on its side." in table
    assert "The number is not registered with the provider." in table
    assert "Check the number with the payee, then retry the row." in table
    assert 'title="account_not_found"' in table
    assert re.search(r">[^<]*_[^<]*<", table.replace("<code>", "").replace("</code>", "")) is None
    assert "GHS 11.50" in table and "CRT-00001" in table
    # The chart is inline SVG; the page carries no script at all (CSP-friendly).
    chart = page[page.index('id="outcome-chart"') : page.index("</figure>")]
    assert "<svg" in chart and "delivered 4" in chart and "failed 2" in chart
    assert "<script" not in page and "style=" not in page
    assert 'id="retry"' in page and "Retry failed rows (2)" in page
    # Reconciled when the run ended: failed payouts moved no money, every row matches the service.
    assert '<span id="reconciliation-status">clean</span>' in page
    start = page.index('id="reconciliation"')
    recon = page[start : page.index("</table>", start)]
    assert "run-end" in recon and "clean" in recon

    paid = _payouts(emulator)
    retry_path = f"{run_path}/retry"
    first = client.post(retry_path, data={"csrf_token": token})
    second = client.post(retry_path, data={"csrf_token": token})  # a double click before anything started
    for preview in (first, second):
        assert preview.status_code == 200
        assert "Run name: <code>april-retry1</code>" in preview.text
        assert "2 rows: 2 valid" in preview.text
    retry_run = _submit(client, token, first)
    retry_page = _final_page(client, retry_run)
    assert "failed 2" in retry_page  # the same destinations fail again: what matters is they were paid once
    assert _payouts(emulator) == paid + 2
    replay_page = _final_page(client, _submit(client, token, second))
    assert "Payouts: failed 2" in replay_page
    assert _payouts(emulator) == paid + 2  # the second retry replayed the first: nothing paid twice

    third = client.post(retry_path, data={"csrf_token": token})
    assert third.status_code == 409 and "A retry of this run already exists" in third.text
    assert _payouts(emulator) == paid + 2


def test_attention_is_paged_and_the_chart_adds_up() -> None:
    rows = [{"row": i + 2, "kind": "failed", "reason": "x"} for i in range(PAGE_SIZE * 2 + 5)]
    summary = {"attention_rows": rows, "payouts_by_status": {"delivered": 3, "failed": 1, "dispatching": 2}}
    first, last = attention(summary, None), attention(summary, "99")
    assert first["pages"] == 3 and [r["row"] for r in first["rows"]][:2] == [2, 3]
    assert last["page"] == 3 and len(last["rows"]) == 5 and last["retryable"] == len(rows)
    assert attention(summary, "nonsense")["page"] == 1
    bars = outcome_chart({**summary, "refused_items": 2, "rows_invalid": 0})
    assert [(b["label"], b["count"]) for b in bars] == [
        ("delivered", 3),
        ("failed", 1),
        ("refused", 2),
        ("not final", 2),
    ]
    assert round(sum(b["width"] for b in bars)) == 400


def test_the_retry_shows_what_it_pays_and_a_row_can_be_dropped(
    client: httpx.Client, emulator: SandboxServer, tmp_path: Path
) -> None:
    token = _login(client)
    rows = payroll_rows(5, prefix="DRP", specials={0: "0001", 2: "0002", 4: "0001"})  # rows 2, 4, 6 fail
    sheet = write_sheet(tmp_path / "may.xlsx", rows)
    with sheet.open("rb") as fh:
        preview = client.post("/upload", data={"csrf_token": token}, files={"sheet": ("may.xlsx", fh)})
    run_path = _submit(client, token, preview)
    _final_page(client, run_path)

    retry = client.post(f"{run_path}/retry", data={"csrf_token": token})
    assert retry.status_code == 200, retry.text[-2000:]
    listed = re.findall(r'name="drop" value="([^"]+)"', retry.text)
    assert listed == ["DRP-00000-rs1", "DRP-00002-rs1", "DRP-00004-rs1"]
    assert "This retry pays 3 rows" in retry.text and "Pay 3 rows" in retry.text
    # Each row says why it failed last time and what to check before paying it again.
    listing = retry.text[retry.text.index('id="retry-table"') : retry.text.index("</table>")]
    why = re.findall(
        r'<td class="reason">([^<]*)</td><td class="fails-again-flag">([^<]*)</td>'
        r'<td class="next-step">([^<]*)</td>',
        listing,
    )
    assert [w for w, _, _ in why] == [
        "The provider could not fund the payout on its side.",
        "The number is not registered with the provider.",
        "The provider could not fund the payout on its side.",
    ]
    assert why[1][2] == "Check the number with the payee, then retry the row."
    # A number the provider does not know fails again as it is (issue 47: the same dead numbers were retried
    # twice); the provider's funds may be there next time.
    assert [again for _, again, _ in why] == ["It may pass", "Yes, as it is", "It may pass"]
    assert re.findall(r'<tr class="fails-again">.*?<code>([^<]+)</code>', listing) == ["DRP-00002-rs1"]
    flagged = re.search(r'<p id="retry-fails-again"[^>]*>([^<]*)</p>', retry.text)
    assert flagged, retry.text[-3000:]
    assert flagged.group(1).startswith("1 row will fail again as it is (row 4 of the run's sheet)")

    # The operator leaves one row out (e.g. a number to check with the payee first): the sheet is built again.
    dropped = client.post(f"{run_path}/retry", data={"csrf_token": token, "drop": "DRP-00002-rs1"})
    assert dropped.status_code == 200, dropped.text[-2000:]
    assert "This retry pays 2 rows" in dropped.text and "Left out: <code>DRP-00002-rs1</code>" in dropped.text
    assert re.findall(r'type="checkbox" name="drop" value="([^"]+)"', dropped.text) == [
        "DRP-00000-rs1",
        "DRP-00004-rs1",
    ]
    nothing_left = client.post(
        f"{run_path}/retry",
        data={"csrf_token": token, "drop": ["DRP-00000-rs1", "DRP-00002-rs1", "DRP-00004-rs1"]},
    )
    assert nothing_left.status_code == 409 and "no rows left after dropping" in nothing_left.text

    paid = _payouts(emulator)
    retry_page = _final_page(client, _submit(client, token, dropped))
    assert "failed 2" in retry_page
    assert _payouts(emulator) == paid + 2  # exactly the rows kept


def test_failed_rows_are_retried_from_the_run_page_while_the_run_still_polls(
    client: httpx.Client, emulator: SandboxServer, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from payops.sandbox.engine.payouts import transition

    token = _login(client)
    # rows 3 and 4 fail at once; row 5 is held: the run waits (settle window 60 s) until it fails by hand
    rows = payroll_rows(5, prefix="CEA", specials={1: "0001", 2: "0002", 3: "0004"})
    sheet = write_sheet(tmp_path / "june.xlsx", rows)
    paid = _payouts(emulator)
    with sheet.open("rb") as fh:
        preview = client.post("/upload", data={"csrf_token": token}, files={"sheet": ("june.xlsx", fh)})
    run_path = _submit(client, token, preview)

    deadline = time.monotonic() + 120
    while "Retry failed rows now (2)" not in (page := client.get(run_path).text):
        assert 'id="outcome"' not in page, "the run ended before its failures could be retried early"
        assert time.monotonic() < deadline, page[-2000:]
        time.sleep(0.5)
    early = client.post(f"{run_path}/retry", data={"csrf_token": token})
    assert early.status_code == 200, early.text[-2000:]
    assert "Run name: <code>june-retry1</code>" in early.text
    assert re.findall(r'type="checkbox" name="drop" value="([^"]+)"', early.text) == [
        "CEA-00001-rs1",
        "CEA-00002-rs1",
    ]
    retry_page = _final_page(client, _submit(client, token, early))
    assert "failed 2" in retry_page
    assert 'id="outcome"' not in client.get(run_path).text  # the run still waits for its held payout
    assert "Retry failed rows now" not in client.get(run_path).text  # nothing left to retry early

    def fail_when_held(reference: str) -> None:
        """The held payout ``reference`` fails by hand, as an operator at the provider would end it."""
        deadline = time.monotonic() + 60
        while True:
            with emulator.state.lock:
                account = emulator.state.env("demo", "test")
                payout = account.payouts.get(reference)
                if payout is not None and payout.status == "held":
                    transition(account, payout, "failed", "account_not_found", datetime.now(UTC))
                    return
            assert time.monotonic() < deadline, f"{reference} never held"
            time.sleep(0.2)

    fail_when_held("CEA-00003")  # the run ends
    page = _final_page(client, run_path)
    assert "Retry failed rows (1)" in page  # only the row no retry took
    late = client.post(f"{run_path}/retry", data={"csrf_token": token})
    assert late.status_code == 200, late.text[-2000:]
    assert "Run name: <code>june-retry2</code>" in late.text
    assert re.findall(r'type="checkbox" name="drop" value="([^"]+)"', late.text) == ["CEA-00003-rs1"]
    late_path = _submit(client, token, late)
    fail_when_held("CEA-00003-rs1")  # the same number is held again; not waited out (its 60 s window)
    assert "failed 1" in _final_page(client, late_path)
    assert _payouts(emulator) == paid + 5 + 2 + 1  # the rows, then every failed row paid again once
    done = client.post(f"{run_path}/retry", data={"csrf_token": token})
    assert done.status_code == 409 and "A retry of this run already exists" in done.text
