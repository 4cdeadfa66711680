"""A CLI command reads payops' settings once, at its first need, and passes them on (issue 44): `payops
check` read them twice (its own read, then the reports' default folder). A second command in the same
process (typer's runner) reads its own environment afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from payops.deployments.cli import build_app
from payops.store.settings import PayopsSettings
from typer.testing import CliRunner

from tests.deployments.console_harness import payroll_rows, write_sheet


def test_a_command_reads_the_settings_once_and_the_next_command_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[PayopsSettings] = []
    read = PayopsSettings.from_env.__func__  # type: ignore[attr-defined]

    def counted(cls: type[PayopsSettings]) -> PayopsSettings:
        reads.append(settings := read(cls))
        return settings

    monkeypatch.setattr(PayopsSettings, "from_env", classmethod(counted))
    monkeypatch.setenv("PAYOPS_PAID_BEFORE_DAYS", "0")  # no payops database needed for the check
    sheet = write_sheet(tmp_path / "payroll.xlsx", payroll_rows(3, prefix="ONCE"))
    app = build_app("check")

    for reports in ("first", "second"):
        monkeypatch.setenv("PAYOPS_REPORT_URL", str(tmp_path / reports))
        before = len(reads)
        done = CliRunner().invoke(app, ["check", str(sheet), "--json"])
        assert done.exit_code == 0, done.output
        assert len(reads) - before == 1
        folders = {Path(p).parent.name for p in json.loads(done.stdout)["report_files"].values()}
        assert folders == {reports}, folders  # this command's environment, not the last one's
