"""Scratch directories are named by their owner's process id; a new one sweeps those whose owner is gone
(a SIGKILLed run's spill file), never a running owner's, nor another kind's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from payops.tasks.runtime.scratch import scratch_dir, sweep_orphans


def a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_new_scratch_directory_sweeps_what_dead_owners_left_and_keeps_the_rest(tmp_path: Path) -> None:
    dead = tmp_path / f"payops-run-{a_dead_pid()}-abc123"
    (dead / "big").mkdir(parents=True)
    (dead / "big" / "rows.sqlite3").write_bytes(b"x" * 1024)
    alive = tmp_path / f"payops-run-{os.getpid()}-def456"  # this process: running
    alive.mkdir()
    init = tmp_path / "payops-run-1-ghi789"  # pid 1: running, not ours to signal
    init.mkdir()
    other_kind = tmp_path / f"payops-run-match-{a_dead_pid()}-jkl012"
    other_kind.mkdir()
    unrelated = tmp_path / "payops-run-notapid"
    unrelated.mkdir()

    made = scratch_dir("run", tmp_path)
    try:
        assert Path(made.name).name.startswith(f"payops-run-{os.getpid()}-")
        assert not dead.exists()
        assert alive.exists() and init.exists() and other_kind.exists() and unrelated.exists()
    finally:
        made.cleanup()
    assert not Path(made.name).exists()
    assert sweep_orphans("run-match", tmp_path) == [other_kind]
