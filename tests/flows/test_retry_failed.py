"""`payops payouts retry-failed LABEL`: pays exactly the failed rows once; a second retry pays nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.payouts.retry_sheet import next_retry_label, retry_label

from tests.flows.support import emulator_stats, payroll_rows, run_payops, write_sheet

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


def payops(args: list[str], server: SandboxServer) -> subprocess.CompletedProcess[str]:
    return run_payops(args, server.env, timeout=180)


def test_retry_labels_are_derived_and_deterministic() -> None:
    assert retry_label("march") == "march-retry1"
    assert retry_label("march-retry1") == "march-retry2"
    assert retry_label("march-retry9") == "march-retry10"
    taken = {"march-retry1", "march-retry2"}  # retries of one family share one counter: labels stay unique
    assert next_retry_label("march", taken.__contains__) == "march-retry3"
    assert next_retry_label("march-retry1", taken.__contains__) == "march-retry3"


def test_retry_failed_pays_the_failed_rows_exactly_once(
    prefect_harness, server: SandboxServer, tmp_path: Path
) -> None:
    reports = str(tmp_path / "reports")
    # Rows 3 and 5 of the sheet (indexes 1 and 3) fail at the provider; the other four are delivered.
    rows = payroll_rows(6, prefix="RTY", specials={1: "0001", 3: "0002"})
    sheet = write_sheet(tmp_path / "march.xlsx", rows)
    common = ["--report-dir", reports, "--no-name-check", "--poll-deadline", "20", "--json"]

    first = payops(["payouts", str(sheet), "--label", "march", *common], server)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["payouts_by_status"] == {"delivered": 4, "failed": 2}
    assert [(a["row"], a["kind"]) for a in summary["attention_rows"]] == [(3, "failed"), (5, "failed")]
    first_row = summary["attention_rows"][0]
    assert first_row["code"] == "insufficient_funds_at_provider"  # --json keeps the code for machines
    assert first_row["reason"] == "The provider could not fund the payout on its side."
    assert first_row["next_step"] == "Retry the row later; if it fails again, contact the provider."
    assert summary["attention_rows"][0]["amount"] == "11.50"
    paid_before = emulator_stats(server.base_url)["payouts"]

    # Without the service credential the retry is refused at once: nothing claimed, no run created (issue 47).
    uncredentialed = run_payops(["payouts", "retry-failed", "march", *common], {}, timeout=180)
    assert uncredentialed.returncode == 2, uncredentialed.stderr
    assert uncredentialed.stderr.startswith("error: no Payments credentials: set PAYOPS_")
    assert "nothing was claimed or sent" in uncredentialed.stderr and not uncredentialed.stdout

    retry = payops(["payouts", "retry-failed", "march", *common], server)
    assert retry.returncode == 0, retry.stderr
    retried = json.loads(retry.stdout)
    assert retried["label"] == "march-retry1" and retried["rows_total"] == 2
    assert retried["payouts_by_status"] == {"failed": 2}  # same destinations: they fail again, paid once
    assert emulator_stats(server.base_url)["payouts"] == paid_before + 2
    book = load_workbook(Path(reports) / "march-retry1-sheet.xlsx", read_only=True)
    header, *cells = book["payouts"].iter_rows(values_only=True)
    retry_refs = [dict(zip(header, r, strict=True))["reference"] for r in cells]
    assert retry_refs == ["RTY-00001-rs1", "RTY-00003-rs1"]

    again = payops(["payouts", "retry-failed", "march", *common], server)
    assert again.returncode == 2
    assert "a retry of march already ran as march-retry1" in again.stderr
    assert emulator_stats(server.base_url)["payouts"] == paid_before + 2

    # A retry interrupted before its report (here: the report removed) replays when started again.
    (Path(reports) / "march-retry1.json").unlink()
    replay = payops(["payouts", "retry-failed", "march", *common], server)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["replayed_payouts"] == 2
    assert emulator_stats(server.base_url)["payouts"] == paid_before + 2

    # `payops runs` lists these runs from the Prefect server, newest first, with their outcomes.
    listed = payops(["runs", "--limit", "50", "--json"], server)
    assert listed.returncode == 0, listed.stderr
    runs = [r for r in json.loads(listed.stdout) if r["label"] in {"march", "march-retry1"}]
    assert [r["label"] for r in runs] == ["march-retry1", "march-retry1", "march"]
    assert runs[-1]["payouts_by_status"] == {"delivered": 4, "failed": 2}
    # the state is named for the outcome (flows/outcomes.py): two payouts failed
    assert runs[-1]["state"] == "Completed with failures" and runs[-1]["outcome"] == "completed"
    assert runs[-1]["needs_attention"] == 2
    assert runs[-1]["report_files"]["json"].endswith("march.json")

    shown = payops(["runs", "show", "march"], server)
    assert shown.returncode == 0, shown.stderr
    assert "payouts: delivered 4, failed 2" in shown.stdout
    assert "row 3 failed:" in shown.stdout and "The provider could not fund the payout" in shown.stdout
    assert "next: Check the number with the payee, then retry the row." in shown.stdout  # row 5
    assert "insufficient_funds_at_provider" not in shown.stdout  # people read words, not codes
    by_id = payops(["runs", "show", runs[-1]["id"], "--json"], server)
    assert json.loads(by_id.stdout)["label"] == "march"
    unknown = payops(["runs", "show", "no-such-run"], server)
    assert unknown.returncode == 1 and "no payout run with name, label or id 'no-such-run'" in unknown.stderr
