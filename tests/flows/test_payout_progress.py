"""`payops payouts` shows how far a run is: live bars on a terminal, plain lines piped, none with --json."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.support import REPO, cli_env, payroll_rows, run_payops, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as s:
        yield s


def _sheet(tmp_path: Path, prefix: str) -> Path:
    # 150 rows: two batches; one row held for review at the provider.
    return write_sheet(tmp_path / f"{prefix}.xlsx", payroll_rows(150, prefix=prefix, specials={7: "0004"}))


def _args(sheet: Path, label: str, tmp_path: Path) -> list[str]:
    return [
        "payouts",
        str(sheet),
        "--label",
        label,
        "--report-dir",
        str(tmp_path / "reports"),
        "--poll-deadline",
        "8",
        "--no-name-check",
    ]


def test_plain_progress_lines_when_piped(prefect_harness, server: SandboxServer, tmp_path: Path) -> None:
    proc = run_payops(_args(_sheet(tmp_path, "PIPE"), "progress-piped", tmp_path), server.env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    phases = [line for line in lines if line.startswith("phase: ")]
    assert phases == [
        "phase: reading and validating the sheet",
        "phase: pre-flight: balance, limits, payee names",
        "phase: sending batches",
        "phase: polling payouts to a final status",
        "phase: writing the reports",
        "phase: done",
    ]
    assert "batches sent: 0/2" in lines and "batches sent: 2/2" in lines
    assert "payouts final: 149/150, awaiting review: 1" in lines
    assert "\x1b[" not in proc.stdout  # no terminal control codes in a pipe
    assert lines.index("phase: done") < lines.index("run progress-piped: completed")


def test_live_display_on_a_terminal(prefect_harness, server: SandboxServer, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "payops.deployments.cli",
            *_args(_sheet(tmp_path, "TTY"), "progress-tty", tmp_path),
        ],
        env=cli_env(server.env) | {"COLUMNS": "120", "TERM": "xterm-256color"},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    screen = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal closes when the child exits
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=180)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    text = screen.decode(errors="replace")
    assert code == 0, stderr[-2000:]
    assert "\x1b[" in text  # drawn in place with terminal control codes, not printed line by line
    assert "batches sent" in text and "2/2" in text
    assert "payouts final" in text and "149/150" in text and "awaiting review: 1" in text
    assert "phase: " not in text  # the plain-line form is for pipes only
    assert "run progress-tty: completed" in text
    assert "INFO" not in text + stderr  # Prefect's info lines do not scroll the display away


def test_json_prints_only_the_summary(prefect_harness, server: SandboxServer, tmp_path: Path) -> None:
    args = [*_args(_sheet(tmp_path, "JSN"), "progress-json", tmp_path), "--json"]
    proc = run_payops(args, server.env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["label"] == "progress-json" and summary["batches"] == 2
    assert [a["kind"] for a in summary["attention_rows"]] == ["awaiting_review"]
    assert summary["attention_rows"][0]["row"] == 9
