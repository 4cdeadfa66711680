"""Figures finance can trust (issue 47): a run's paid, not-paid and fee figures are what left the wallet.

A payroll with payees the provider refuses is paid through the payops server from the CLI (a person's shell:
nothing but the server's address and a token). The failed payouts' fees are released by the service, so the
run's figures on every surface (CLI ``--json``, ``payops runs show``, the console's run page, the Prefect
artifact, the xlsx report) must equal the wallet's movement read at the emulator and the run
reconciliation's wallet effect, never the sheet total.
"""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from openpyxl import load_workbook
from payops.sandbox import SandboxServer
from payops.tasks.reports.artifacts import artifact_key

from tests.deployments.console_harness import payops
from tests.deployments.hr_export import hr_export, hr_rows, hr_total
from tests.deployments.test_front_door import bare_env, console_session, server  # noqa: F401 - fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def wallet_total(emulator: SandboxServer, currency: str = "GHS") -> Decimal:
    """The wallet's total at the service (available + reserved), over the emulator's businesses."""
    stats = httpx.get(f"{emulator.base_url}/_sandbox/stats", timeout=10).json()
    total = Decimal(0)
    for biz in stats["businesses"].values():
        for env in biz.values():
            ledger = env["ledger"].get(currency) or {}
            total += Decimal(ledger.get("available", "0")) + Decimal(ledger.get("reserved", "0"))
    return total


async def _summary_artifact(flow_run_id: str, label: str) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    (summary,) = [a for a in found if a.key == artifact_key(label, "summary")]
    return str(summary.data)


def test_a_runs_figures_are_what_left_the_wallet_on_every_surface(
    server: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = bare_env(server, "olu", tmp_path / "olu")
    rows = hr_rows(8, prefix="MOV", failing=("0001", "0002", "0001"))  # 3 fail at the provider
    sheet = hr_export(tmp_path / "december-payroll.xlsx", rows)
    failed = hr_total(rows[:3])
    paid = hr_total(rows) - failed

    before = wallet_total(server["emulator"])
    done = payops(env, "payouts", str(sheet), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    after = wallet_total(server["emulator"])
    assert summary["payouts_by_status"] == {"delivered": 5, "failed": 3}
    assert summary["amount_total"] == str(hr_total(rows))  # the sheet total: what was approved

    moved = summary["moved"]["GHS"]
    fees = Decimal(moved["fees"])
    assert Decimal(moved["paid"]) == paid and moved["paid_payouts"] == 5 and moved["still_moving"] == 0
    assert Decimal(moved["not_paid"]) == failed and moved["not_paid_payouts"] == 3
    assert fees > 0 and Decimal(summary["fee_total"]) == fees  # the charged fees: none for a failed payout
    left = before - after
    assert left == paid + fees, (left, paid, fees)  # what the wallet moved at the service
    assert Decimal(moved["wallet_effect"]) == -left
    assert summary["reconciliation"]["wallet_effect"] == {"GHS": moved["wallet_effect"]}

    # `payops runs show`, as the operator reads it.
    listed = json.loads(payops(env, "runs", "--json").stdout)
    (run,) = [r for r in listed if r["label"] == summary["label"]]
    shown = payops(env, "runs", "show", run["id"])
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"paid GHS {paid:,.2f} (5 payouts)" in shown.stdout
    assert f"not paid GHS {failed:,.2f} (3 payouts)" in shown.stdout
    assert f"fees GHS {fees:,.2f}" in shown.stdout

    # The console's run page.
    client, _ = console_session(server["url"], "olu")
    page = client.get(f"/runs/{run['id']}").text
    client.close()
    row = re.search(r'<tr data-currency="GHS">(.*?)</tr>', page, re.S)
    assert row is not None, page[-3000:]
    cells = dict(re.findall(r'<td class="([a-z-]+)">([^<]*)</td>', row.group(1)))
    assert cells["paid"].startswith(f"GHS {paid:,.2f} (5 payouts")
    assert cells["not-paid"] == f"GHS {failed:,.2f} (3 payouts)"
    assert cells["fees"] == f"GHS {fees:,.2f}" and cells["wallet"] == f"GHS {-left:,.2f}"

    # The Prefect artifact's money-moved table.
    markdown = asyncio.run(_summary_artifact(run["id"], summary["label"]))
    assert f"| GHS | {paid:.2f} | 5 | {failed:.2f} | 3 | {fees:.2f} | {-left:.2f} |" in markdown

    # The xlsx report: a failed row's fee is 0 (released), the Fee column and its totals row sum to the fees
    # charged; the summary sheet gives paid, not paid, fees and the wallet's movement as numbers.
    book = load_workbook(summary["report_files"]["xlsx"], read_only=True)
    results = list(book.worksheets[0].iter_rows(values_only=True))
    header = list(results[0])
    status, fee = header.index("Payout status"), header.index("Fee")
    by_status: dict[str, Decimal] = {}
    for r in results[1:-1]:
        if r[status] in ("delivered", "failed"):
            by_status[r[status]] = by_status.get(r[status], Decimal(0)) + Decimal(str(r[fee] or 0))
    assert by_status == {"delivered": fees, "failed": Decimal(0)}
    assert Decimal(str(results[-1][fee])).quantize(Decimal("0.01")) == fees  # the totals row
    figures = {k: v for k, v in book["summary"].iter_rows(min_row=2, values_only=True)}
    money = {k: Decimal(str(v)).quantize(Decimal("0.01")) for k, v in figures.items() if "(GHS)" in str(k)}
    assert money["Paid (GHS)"] == paid and money["Not paid (GHS)"] == failed
    assert money["Fees charged (GHS)"] == fees and money["Wallet movement (GHS)"] == -left
    assert money["Amount in the sheet (GHS)"] == hr_total(rows)
    assert not any(str(k).startswith(("rate_limit", "api_calls")) for k in figures)

    # Retried from the CLI: the row whose number the provider does not know is flagged before it is paid
    # again, and a retry whose payouts all fail again charged no fee and paid nothing.
    retried = payops(env, "payouts", "retry-failed", run["name"], "--json")
    assert retried.returncode == 0, retried.stderr[-2000:]
    assert "warning: 1 row will fail again as paid now" in retried.stderr
    assert "row 3 (MOV-0001-rs1): The number is not registered with the provider." in retried.stderr
    again = json.loads(retried.stdout)
    assert again["payouts_by_status"] == {"failed": 3} and again["fee_total"] == "0.00"
    assert again["moved"]["GHS"]["paid"] == "0.00" and again["moved"]["GHS"]["not_paid_payouts"] == 3
