"""Untrusted sheets cost one refusal, never the process: dimension/structure bombs refused before parsing
(library and `payops payouts` in a subprocess), the parser child's crash or limit turned into a refusal."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import payops.tasks.intake.safety as safety
import psutil
import pytest
from bombs import BOMBS, far_corner
from intake_corpus import HEADER, rows_with, write_xlsx
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.intake.reading import check_sheet_file

REPO = Path(__file__).resolve().parents[3]
GIB = 1024 * 1024 * 1024


@pytest.mark.parametrize("name", BOMBS, ids=list(BOMBS))
def test_bombs_are_refused_before_any_parser_sees_them(name: str, tmp_path: Path) -> None:
    build, message = BOMBS[name]
    path = build(tmp_path / "bomb.xlsx")
    assert path.stat().st_size < 30_000  # each is a small file asking for absurd resources
    with pytest.raises(IntakeError, match="refused") as caught:
        check_sheet_file(path)
    assert message in str(caught.value)
    with pytest.raises(IntakeError) as again:
        read_payout_sheet(path)
    assert str(again.value) == str(caught.value)


# payops run by a wrapper that, at exit, writes its own peak RSS (VmHWM: this process only, reset at exec)
# and the largest child it waited for. Neither ``RUSAGE_CHILDREN`` of the test process nor ``wait4``'s usage
# of the child works here: Linux carries the forking process's peak (pytest's, >1 GB late in the suite)
# into the child's ``ru_maxrss`` across exec.
_MEASURED_CLI = """
import atexit, resource, runpy, sys
out = sys.argv[1]
def _peak():
    own = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    with open(out, "w") as f:
        f.write(str(max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)))
atexit.register(_peak)
sys.argv = ["payops", *sys.argv[2:]]
runpy.run_module("payops.deployments.cli", run_name="__main__")
"""


def _run_cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str, float, int]:
    """``payops ARGS`` in a subprocess: exit code, stdout, stderr, seconds and peak RSS (KiB) of that
    process and the children it waited for."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURED_CLI, peak.name, *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=120,
        )
        seconds = time.monotonic() - started
        peak_kib = int(peak.read() or 0)
    assert peak_kib > 0, "the wrapper wrote no peak"
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode(), seconds, peak_kib


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYOPS_", "PREFECT_API"))}
    env["PAYOPS_HOME"] = str(tmp_path / "payops-home")  # its own home: no borrowed `payops serve`
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    return env


@pytest.mark.parametrize("name", BOMBS, ids=list(BOMBS))
def test_cli_refuses_each_bomb_in_one_line_with_exit_2(name: str, tmp_path: Path, cli_env) -> None:
    build, message = BOMBS[name]
    path = build(tmp_path / "bomb.xlsx")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code, out, err, seconds, peak_kib = _run_cli(
        ["payouts", str(path), "--report-dir", str(tmp_path / "reports")], cli_env
    )
    assert code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert "Traceback" not in err and "panicked" not in err and "backtrace" not in err.lower()
    assert "Prefect server" not in err  # refused before any server was needed
    assert seconds < 10, f"{seconds:.1f} s"
    assert peak_kib * 1024 < GIB
    assert {p.pid for p in psutil.Process().children(recursive=True)} == before
    assert not (tmp_path / "reports").exists()


def test_a_parser_killed_by_a_signal_is_one_refusal_and_this_process_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the shape check the 1.6 KB far-corner file reaches calamine, which aborts (SIGABRT) on
    # "memory allocation of 549755813888 bytes failed", or hits the child's memory limit first.
    monkeypatch.setattr(safety, "refuse_absurd_shape", lambda *args: None)
    path = far_corner(tmp_path / "far.xlsx")
    assert path.stat().st_size < 2000
    before = {p.pid for p in psutil.Process().children()}  # the session's own servers may be running
    with pytest.raises(IntakeError) as caught:
        read_payout_sheet(path)
    message = str(caught.value)
    assert message.startswith("the file could not be read safely: the parser was stopped by SIG"), message
    assert "\n" not in message and "Traceback" not in message
    assert {p.pid for p in psutil.Process().children()} - before == set()  # the child was reaped
    good = write_xlsx(tmp_path / "good.xlsx", [HEADER, rows_with()[1]])
    assert len(read_payout_sheet(good).rows) == 1  # and the next sheet reads as usual


def test_the_parser_child_memory_and_time_limits_become_refusals(tmp_path: Path) -> None:
    rows = [rows_with(reference=f"R{i}")[1] for i in range(3000)]
    good = write_xlsx(tmp_path / "good.xlsx", [HEADER, *rows])
    with pytest.raises(IntakeError, match=r"^the file could not be read safely: .*memory"):
        read_payout_sheet(good, IntakeOptions(parser_memory_bytes=16 * 1024 * 1024))
    with pytest.raises(IntakeError, match=r"^the file could not be read safely: parsing took longer than"):
        read_payout_sheet(good, IntakeOptions(parser_timeout_s=0.01))
    with pytest.raises(IntakeError, match=r"^the file could not be read safely: the parsed cells exceed"):
        read_payout_sheet(good, IntakeOptions(max_parser_output_bytes=100))
    assert len(read_payout_sheet(good).rows) == 3000


def test_a_formula_without_a_saved_value_is_located_by_row_and_column(tmp_path: Path) -> None:
    path = write_xlsx(
        tmp_path / "f.xlsx",
        [HEADER, rows_with()[1], ["PAY-2", "=100+50", "GHS", "mtn", "0241234567", "", "=NOW()"]],
    )
    with pytest.raises(IntakeError, match="formulas without a saved value") as caught:
        read_payout_sheet(path)
    assert caught.value.errors() == [
        {"row": 3, "column": "amount", "message": str(caught.value)},
        {"row": 3, "column": "note", "message": str(caught.value)},
    ]
