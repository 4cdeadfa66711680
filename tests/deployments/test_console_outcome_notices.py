"""Operators are told the outcome (issue 47): "after a rejection ('wrong month…') the operator's Notices said
'No notices for you'; approval and completion are not notified either".

A local console (policy: one approver for any GHS run) with two operators, ``olu`` and ``dee``, and an
approver ``bea``. olu starts a run, bea rejects it with a comment: olu's notices carry the comment
(escaped, on one line), dee sees nothing of it. olu starts another, bea approves it: olu is told it was
approved, then that it completed, with its figures; the nav counts olu's new notices until olu reads them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.sandbox import SandboxServer

from tests.deployments.browser_harness import local_console
from tests.deployments.console_harness import PASSWORD, payroll_rows, serve_in_thread, write_sheet
from tests.deployments.test_console_words import approve, logged_in, run_page_when, send, token

pytestmark = pytest.mark.e2e

HOSTILE = "wrong month <script>alert('x')</script>\nsee the HR sheet " + "z" * 600


@pytest.fixture
def served(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    app, local = local_console(tmp_path, emulator, monkeypatch, policy="GHS 0:1")
    for name, role in [("olu", "operator"), ("dee", "operator"), ("bea", "approver")]:
        app.state.console.users.add(name, role, PASSWORD)
    with serve_in_thread(app) as url:
        yield {"url": url, "tmp": tmp_path, "engine": app.state.console.engine}
    local.join(30)


def start_run(olu: httpx.Client, sheet: Path) -> str:
    with sheet.open("rb") as fh:
        preview = olu.post("/upload", data={"csrf_token": token(olu.get("/").text)}, files={"sheet": fh})
    return send(olu, preview)


def notices_when(client: httpx.Client, marker: str, timeout_s: float = 120) -> str:
    """The user's notices page once it shows ``marker`` (the flow posts the outcome as the run ends). Reading
    the page marks the user's notices read, so each poll is a reading."""
    deadline = time.monotonic() + timeout_s
    while marker not in (page := client.get("/notices").text):
        assert time.monotonic() < deadline, f"{marker!r} never on the notices: {page[-2000:]}"
        time.sleep(1)
    return page


def notice_texts(page: str) -> list[str]:
    return re.findall(r'<td class="notice-text">(.*?)</td>', page, flags=re.S)


def test_a_rejection_reaches_the_initiator_with_its_comment_and_no_other_operator(
    served: dict[str, Any],
) -> None:
    url = served["url"]
    olu, dee, bea = (logged_in(url, n) for n in ("olu", "dee", "bea"))
    run_path = start_run(olu, write_sheet(served["tmp"] / "payroll-oct.xlsx", payroll_rows(3, prefix="RJN")))
    page = run_page_when(bea, run_path, 'id="approval-form"', 90)
    form = {"csrf_token": token(page), "decision": "reject", "comment": HOSTILE}
    assert bea.post(f"{run_path}/approval", data=form).status_code == 303

    # Before olu reads it, the runs page lists olu's new notice and every page's nav counts it.
    runs = run_page_when(olu, "/runs", 'id="your-notices"', 120)
    assert re.search(r'id="notice-count">1<', runs) and "was rejected by bea" in runs
    page = notices_when(olu, "rejected by bea")
    (text,) = [t for t in notice_texts(page) if "rejected" in t]
    assert text.startswith("Payout run payroll-oct was rejected by bea: “wrong month &lt;script&gt;alert(")
    assert "<script>" not in page and "&lt;/script&gt; see the HR sheet zzz" in text  # one line, escaped
    assert "zzz…”. Nothing was sent (3 payouts" in text and "z" * 400 not in text  # capped
    assert "<td>new</td>" in page
    assert 'id="notice-count"' not in olu.get("/runs").text  # read: no longer counted
    assert "<td>read</td>" in olu.get("/notices").text

    other = dee.get("/notices").text  # another operator: nothing about olu's run
    assert "No notices for you." in other and "wrong month" not in other
    assert "wrong month" not in bea.get("/notices").text  # the approvers' notice only (closed)


def test_approval_and_completion_reach_the_initiator_with_the_runs_figures(served: dict[str, Any]) -> None:
    url = served["url"]
    olu, dee, bea = (logged_in(url, n) for n in ("olu", "dee", "bea"))
    rows = payroll_rows(3, prefix="OKN")
    run_path = start_run(olu, write_sheet(served["tmp"] / "payroll-nov.xlsx", rows))
    approve(bea, run_path)
    page = notices_when(olu, "completed")
    texts = notice_texts(page)
    approved = next(t for t in texts if "approved" in t)
    completed = next(t for t in texts if "completed" in t)
    assert approved.startswith("Payout run payroll-nov was approved by bea: sending 3 payouts (GHS ")
    assert "Comments: “bea: checked”." in approved
    assert completed.startswith("Payout run payroll-nov completed: 3 of 3 payouts delivered. Paid GHS 34.50 ")
    assert "(3 payouts) · not paid GHS 0.00 (0 payouts) · fees GHS " in completed  # what moved (issue 47)
    for r in rows:
        assert r[6] not in page  # never a payee's number
    assert "payroll-nov" not in dee.get("/notices").text
