"""deployments/processes.py: children stopped together within one grace time, a stop signal raised once in
the main thread, and the exit deadline that ends a process whose exit handlers hang."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from payops.deployments.processes import start_child, stop_children

REPO = Path(__file__).resolve().parents[2]
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
    "time.sleep(120)"
)


def _python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_children_ignoring_sigterm_are_killed_after_one_shared_grace_time(tmp_path: Path) -> None:
    logs = [tmp_path / f"c{i}.log" for i in range(3)]
    command = [sys.executable, "-c", STUBBORN]
    children = [(f"c{i}", start_child(command, {}, log)) for i, log in enumerate(logs)]
    deadline = time.monotonic() + 30
    while not all(log.read_text().startswith("ready") for log in logs):  # SIG_IGN in place
        assert time.monotonic() < deadline
        time.sleep(0.05)
    said: list[str] = []
    start = time.monotonic()
    stop_children(children, grace_s=2, say=said.append)
    took = time.monotonic() - start
    assert all(proc.returncode == -signal.SIGKILL for _, proc in children)
    assert took < 4, took  # one grace time for all three, not 2 s each in turn
    assert said.count("c1 did not stop within 2 s: killed") == 1 and "stopping c0 ..." in said


def test_the_first_stop_signal_raises_in_the_main_thread_and_later_ones_are_ignored() -> None:
    code = (
        "import os, signal, time\n"
        "from payops.deployments.processes import StopRequested, stop_on_signals\n"
        # Python's own handler, whatever the test runner inherited (a background job of a shell without job
        # control starts with SIGINT ignored): the handler the block must give back
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "with stop_on_signals():\n"
        "    try:\n"
        "        print('waiting', flush=True)\n"
        "        time.sleep(60)\n"
        "    except StopRequested as stop:\n"
        "        print('stop', stop, flush=True)\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.5)\n"
        "        print('still stopping', flush=True)\n"
        "print('handler back', signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    proc = _python(code)
    assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.splitlines() == ["stop SIGTERM", "still stopping", "handler back True"], out
    assert proc.returncode == 0


def test_the_exit_deadline_ends_a_process_whose_exit_hangs() -> None:
    code = (
        "import atexit, time\n"
        "from payops.deployments.processes import exit_by_deadline\n"
        "atexit.register(time.sleep, 120)  # an exit handler that never ends in time\n"
        "exit_by_deadline(1.0, code=3)\n"
        "print('returning', flush=True)\n"
    )
    proc = _python(code)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert out.splitlines() == ["returning", "still stopping after 1 s: exiting now"]
