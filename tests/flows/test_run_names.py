"""One name per run: the label operators chose, else the sheet's name, is the Prefect run's name (a name typed
in Prefect's run form is kept), and what `payops runs`, `runs show` and `approve` take; `runs show` picks the
newest run of a name and says how many others share it; `payops runs` shows each run's id and outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.support import payroll_rows, run_payops, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


def test_runs_show_and_approve_take_the_one_name_of_a_run(
    prefect_harness, server: SandboxServer, tmp_path: Path
) -> None:
    reports = ["--report-dir", str(tmp_path / "reports"), "--json", "--no-name-check"]
    sheet = write_sheet(tmp_path / "Payroll Nov.xlsx", payroll_rows(2, prefix="NAM"))
    paid = run_payops(["payouts", str(sheet), "--label", "nov-payroll", *reports], server.env)
    assert paid.returncode == 0, paid.stderr
    dry = run_payops(["payouts", str(sheet), "--label", "nov-payroll", "--dry-run", *reports], server.env)
    assert dry.returncode == 0, dry.stderr
    unlabelled = run_payops(["payouts", str(sheet), "--dry-run", *reports], server.env)
    assert unlabelled.returncode == 0, unlabelled.stderr

    listed = run_payops(["runs", "--json"], server.env)
    runs = [r for r in json.loads(listed.stdout) if r["name"] in ("nov-payroll", "Payroll Nov")]
    assert [(r["name"], r["state"]) for r in runs] == [
        ("Payroll Nov", "Dry run"),
        ("nov-payroll", "Dry run"),
        ("nov-payroll", "Completed"),
    ]
    newest, older = runs[1]["id"], runs[2]["id"]
    text = run_payops(["runs"], server.env).stdout
    assert f"{newest}  Dry run" in text and f"{older}  Completed" in text  # the id `approve` takes

    shown = run_payops(["runs", "show", "nov-payroll"], server.env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run nov-payroll ({newest})")
    assert f"1 older run with the name 'nov-payroll': {older}" in shown.stdout
    as_json = json.loads(run_payops(["runs", "show", "nov-payroll", "--json"], server.env).stdout)
    assert as_json["id"] == newest and as_json["others"] == [older]
    # Without a label the sheet's name is the run's name; its derived label is shown beside it.
    by_sheet = run_payops(["runs", "show", "Payroll Nov"], server.env)
    assert by_sheet.returncode == 0
    assert by_sheet.stdout.startswith(f"run Payroll Nov ({runs[0]['id']}), label sheet-")


def test_a_run_name_typed_in_prefects_form_is_kept(
    prefect_harness, server: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs created with a name (Prefect's Custom run form, the console) keep it; a name Prefect made up
    (two random words) gives way to the sheet's name."""
    from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow_async

    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    sheet = write_sheet(tmp_path / "December run.xlsx", payroll_rows(2, prefix="TYP"))
    params = PayoutRunParams(source=str(sheet), dry_run=True, check_names=False, report_dir=str(tmp_path))

    async def run_named(name: str) -> str:
        async with get_client() as client:
            flow_run = await client.create_flow_run(
                payout_spreadsheet, name=name, parameters={"params": params.model_dump(mode="json")}
            )
            await run_flow_async(
                payout_spreadsheet, flow_run=flow_run, parameters={"params": params}, return_type="state"
            )
            return (await client.read_flow_run(flow_run.id)).name

    assert asyncio.run(run_named("Payroll December, second try")) == "Payroll December, second try"
    assert asyncio.run(run_named("brave-otter")) == "December run"  # made up by Prefect's server
    assert asyncio.run(run_named("Sleek-Baya")) == "December run"  # pre-filled by Prefect's run form
    assert asyncio.run(run_named("Fantastic-Vicuña")) == "December run"  # the form's words are not all ASCII
