"""One run summary whatever the entry point (issue 44): the CLI's ``--json`` (through the payops server, and
its own refusal of an unsafe file before any server is asked), the server's run JSON (``GET /runs/ID``) and
the flow's own result are the same `PayoutRunSummary`, field for field, for a valid sheet, a refused one, a
sheet whose rows partly fail, and a file refused whole."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.tasks.payouts.run_summary import PayoutRunSummary

from tests.deployments.console_harness import bad_sheet, good_sheet, payops, payroll_rows, write_sheet
from tests.deployments.test_front_door import api, bare_env, server  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

#: what differs between two runs of the same sheet by nature: who and when, how long, where the reports went
PER_RUN = {"label", "source", "started_by", "duration_s", "phase_durations_s", "report_files", "rate_limit"}
PER_RUN |= {"reconciliation", "api_calls", "poll_rounds", "poll_calls_per_round", "attention_rows", "moved"}
PER_RUN |= {"preflight", "replayed_payouts"}  # the second run's lookups are cached, its payouts replayed


def _flow(sheet: Path, label: str, reports: Path) -> dict[str, Any]:
    """The flow's own result for the sheet, run in this process."""
    params = PayoutRunParams(source=str(sheet), label=label, report_dir=str(reports), settle_window_s=5)
    state = asyncio.run(payout_spreadsheet(params, return_state=True))
    return run_summary(state).as_json()


def _same_model(*summaries: dict[str, Any]) -> None:
    """Each is a payout run summary (no field it does not declare), with the same fields and, beyond what
    differs by run, the same values."""
    typed = [PayoutRunSummary.model_validate(s) for s in summaries]
    fields = [set(s) - {"started_by"} for s in summaries]  # only a run the payops server started has one
    assert all(f == fields[0] for f in fields), [sorted(f ^ fields[0]) for f in fields]
    facts = [{k: v for k, v in t.as_json().items() if k not in PER_RUN} for t in typed]
    differ = [
        {k: (f.get(k), facts[0].get(k)) for k in f.keys() | facts[0].keys() if f.get(k) != facts[0].get(k)}
        for f in facts
    ]
    assert differ == [{}] * len(facts)


def test_the_cli_the_server_and_the_flow_give_one_summary_for_every_kind_of_sheet(
    server: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = bare_env(server, "olu", tmp_path / "olu")
    sheets = {
        "valid": write_sheet(tmp_path / "valid.xlsx", payroll_rows(3, prefix="SEV")),
        "refused": bad_sheet(tmp_path / "refused.xlsx"),
        "failed-rows": good_sheet(tmp_path / "failed.xlsx", n=4, prefix="SEF"),
    }
    expected = {"valid": (0, "completed"), "refused": (2, "invalid_input"), "failed-rows": (0, "completed")}
    for kind, sheet in sheets.items():
        done = payops(env, "payouts", str(sheet), "--label", f"everywhere-{kind}", "--json")
        cli = json.loads(done.stdout)
        assert (done.returncode, cli["outcome"]) == expected[kind], done.stderr[-2000:]
        with api(server, "olu") as olu:
            kept = olu.get(f"/runs/everywhere-{kind}").json()["summary"]
        assert kept == cli  # the CLI prints the summary the server kept, as the flow wrote it
        flowed = _flow(sheet, f"everywhere-{kind}-flow", tmp_path / "flow")
        _same_model(cli, kept, flowed)
    assert cli["payouts_by_status"] == {"delivered": 3, "failed": 1}

    unsafe = tmp_path / "unsafe.xlsx"
    unsafe.write_bytes(b"PK\x03\x04 not a workbook at all")
    done = payops(env, "payouts", str(unsafe), "--label", "everywhere-unsafe", "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    refused_here = json.loads(done.stdout)  # refused by the CLI itself, before any server was asked
    _same_model(refused_here, _flow(unsafe, "everywhere-unsafe", tmp_path / "flow"))
    assert refused_here["outcome"] == "invalid_input" and refused_here["errors"][0]["row"] is None
