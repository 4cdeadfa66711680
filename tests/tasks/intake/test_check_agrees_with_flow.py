"""`payops check` and the payout flow judge every corpus sheet alike; the check never loads Prefect."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from intake_corpus import GOOD, HEADER, write_csv
from payops.flows.outcomes import run_summary
from payops.tasks.payouts.run_summary import PayoutRunSummary, SheetCheckSummary
from payops.tasks.payouts.sheet_check import check_sheet
from test_intake_corpus import FILE_CASES, ROW_CASES

REPO = Path(__file__).resolve().parents[3]
COMPARED = (
    "label",
    "rows_total",
    "rows_valid",
    "rows_invalid",
    "errors",
    "warnings",
    "amount_total",
    "ignored_columns",
)


def _good_and_bad(d: Path) -> Path:
    bad = list(GOOD)
    bad[0], bad[1] = "PAY-002", "10.005"
    return write_csv(d / "mixed.csv", [HEADER, GOOD, bad])


def _all_good(d: Path) -> Path:
    second = list(GOOD)
    second[0], second[4] = "PAY-002", "0241234568"
    return write_csv(d / "good.csv", [HEADER, GOOD, second])


def _corpus() -> dict[str, object]:
    cases = {name: c.build for name, c in {**FILE_CASES, **ROW_CASES}.items() if c.options is None}
    return {**cases, "valid sheet": _all_good, "one invalid row of two": _good_and_bad}


def test_check_and_flow_agree_on_the_corpus(
    prefect_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
    from payops.sandbox import SandboxConfig, SandboxServer

    corpus = _corpus()
    assert len(corpus) >= 50
    with SandboxServer(SandboxConfig()) as emulator:  # a dry run prices the sheet: it needs the service
        for key, value in emulator.env.items():
            monkeypatch.setenv(key, value)
        for i, (name, build) in enumerate(corpus.items()):
            folder = tmp_path / f"case{i}"
            folder.mkdir()
            source = str(build(folder))
            checked = check_sheet(source, str(folder / "check"))
            params = PayoutRunParams(source=source, dry_run=True, report_dir=str(folder / "flow"))
            flowed = run_summary(asyncio.run(payout_spreadsheet(params, return_state=True)))
            check_exit = SheetCheckSummary.model_validate(checked).exit_code
            assert check_exit == PayoutRunSummary.model_validate(flowed).exit_code, name
            assert {k: checked.get(k) for k in COMPARED} == {k: flowed.get(k) for k in COMPARED}, name
            if checked["outcome"] == "valid":
                assert flowed["outcome"] == "dry_run", name
            else:
                assert checked["outcome"] == flowed["outcome"] == "invalid_input", name
            check_reports = sorted(p.name for p in (folder / "check").glob("*"))
            flow_reports = sorted(p.name for p in (folder / "flow").glob("*"))
            assert check_reports == flow_reports, name


def test_check_command_never_imports_prefect(tmp_path: Path) -> None:
    sheet = _good_and_bad(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "payops.deployments.cli", "check", str(sheet), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PAYOPS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    imported = [line.rsplit("|", 1)[-1].strip() for line in lines if "import time:" in line]
    assert "payops.tasks.intake" in imported and "payops.tasks.payouts.sheet_check" in imported
    assert not [m for m in imported if m.split(".")[0] == "prefect"]
    summary = json.loads(proc.stdout)
    assert [(e["row"], e["column"]) for e in summary["errors"]] == [(3, "amount")]


def test_check_command_exit_codes_and_report(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "payops.deployments.cli", "check", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = run(str(_all_good(tmp_path)), "--report-dir", str(tmp_path / "r"), "--label", "ok-sheet")
    assert good.returncode == 0 and "ok-sheet: valid" in good.stdout
    assert (tmp_path / "r" / "ok-sheet-validation.xlsx").is_file()
    bad = run(str(_good_and_bad(tmp_path)), "--report-dir", str(tmp_path / "r"))
    assert bad.returncode == 2
    assert "row 3, column amount: the amount '10.005' has more than 2 decimals" in bad.stdout
    missing = run(str(tmp_path / "nowhere.xlsx"), "--json")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "file not found" in json.loads(missing.stdout)["errors"][0]["message"]


@pytest.mark.parametrize("name", ["valid sheet", "one invalid row of two"])
def test_check_writes_the_validation_report_the_flow_writes(name: str, tmp_path: Path) -> None:
    summary = check_sheet(str(_corpus()[name](tmp_path)), str(tmp_path / "r"))
    assert Path(summary["report_files"]["validation"]).is_file()


def test_a_csv_read_in_chunks_is_judged_as_one_read_whole(tmp_path: Path) -> None:
    """Every corpus csv, read whole and read a chunk at a time into a spill (as a csv larger than
    PAYOPS_STREAM_CSV_OVER_BYTES is), gets the same label, counts, errors, warnings and outcome."""
    compared = (*COMPARED, "outcome")
    checked = 0
    for i, (name, build) in enumerate(_corpus().items()):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        source = str(build(folder))
        if not source.endswith(".csv"):
            continue
        whole = check_sheet(source, str(folder / "whole"))
        chunked = check_sheet(source, str(folder / "chunked"), stream_over_bytes=0)
        assert {k: chunked.get(k) for k in compared} == {k: whole.get(k) for k in compared}, name
        checked += 1
    assert checked >= 20
