"""store/home.py: the record `payops serve` keeps in its payops home, and how commands read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from payops.store.home import (
    ServeRecord,
    clear_serve_record,
    last_ports,
    read_serve_record,
    record_path,
    write_serve_record,
)
from payops.store.settings import PayopsSettings

RECORD = ServeRecord(
    pid=os.getpid(), prefect_api_url="http://127.0.0.1:9/api", console_url="http://127.0.0.1:9"
)


def test_a_record_is_written_0600_and_read_back_while_its_writer_runs(tmp_path: Path) -> None:
    path = write_serve_record(RECORD, tmp_path)
    assert path == record_path(tmp_path) and path.stat().st_mode & 0o777 == 0o600
    assert read_serve_record(tmp_path) == RECORD
    assert read_serve_record(tmp_path / "elsewhere") is None  # another home has no serve


def test_the_record_of_a_serve_that_is_gone_is_not_a_running_serve(tmp_path: Path) -> None:
    code = "import os; print(os.getpid())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    write_serve_record(RECORD.model_copy(update={"pid": int(dead.stdout)}), tmp_path)
    assert read_serve_record(tmp_path) is None
    assert read_serve_record(tmp_path, running=False) is not None  # its ports and key, for the next serve


def test_a_serve_clears_only_its_own_record(tmp_path: Path) -> None:
    write_serve_record(RECORD, tmp_path)
    clear_serve_record(RECORD.pid + 1, tmp_path)
    assert read_serve_record(tmp_path) == RECORD
    clear_serve_record(RECORD.pid, tmp_path)
    assert not record_path(tmp_path).exists() and read_serve_record(tmp_path, running=False) is None


def test_a_clean_stop_keeps_the_ports_for_the_next_serve(tmp_path: Path) -> None:
    """Report links in Prefect's artifacts name the console's port: a restart takes the same ports
    (issue 47), after a clean stop as after a kill."""
    assert last_ports(tmp_path) == {}  # never served
    ports = {"prefect": 4201, "console": 8765, "sandbox": 8801}
    write_serve_record(RECORD.model_copy(update={"ports": ports}), tmp_path)
    assert last_ports(tmp_path) == ports  # killed: its record is left
    clear_serve_record(RECORD.pid, tmp_path)
    assert read_serve_record(tmp_path) is None and last_ports(tmp_path) == ports  # stopped cleanly


def test_a_damaged_record_counts_as_none(tmp_path: Path) -> None:
    record_path(tmp_path).write_text('{"pid": "not a number"')
    assert read_serve_record(tmp_path) is None


def test_a_command_never_starts_its_own_server_beside_a_recorded_serve_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.deployments.prefect_server import ServeUnreachable, prefect_api
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    settings = PayopsSettings(home=tmp_path)
    write_serve_record(RECORD, tmp_path)  # this process stands for serve; nothing answers on port 9
    said: list[str] = []
    unreachable = rf"payops serve of the home {tmp_path} \(pid {os.getpid()}\)"
    # No Prefect API configured here, even after a test that ran the session's Prefect harness.
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(ServeUnreachable, match=unreachable), prefect_api(settings, said.append):
            pass
    assert said == []
