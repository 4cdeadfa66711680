"""Scratch directories a payops process owns (a large run's spill file, a run check's match file), named by
the owner's process id, and the sweep that removes what a killed owner left behind.

A run deletes its scratch directory when it ends, also on an error; a SIGKILL (the OOM killer, a node
drained) gives it no chance, and a million-row spill is gigabytes in the temporary directory. So each new
scratch directory first sweeps those of its kind whose owner is no longer running. A process id reused by
another process keeps a dead owner's directory until that process ends too: the sweep errs on keeping.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "payops-"


def _pattern(kind: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(PREFIX + kind)}-(\d+)-")


def running(pid: int) -> bool:
    """True when a process with id ``pid`` exists (ours to signal or not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        return True
    return True


def sweep_orphans(kind: str, directory: Path | None = None) -> list[Path]:
    """Remove the ``kind`` scratch directories in ``directory`` (default: the system's temporary one) whose
    owning process is gone; the paths removed."""
    base = Path(directory or tempfile.gettempdir())
    pattern = _pattern(kind)
    removed = []
    for path in base.glob(f"{PREFIX}{kind}-*"):
        found = pattern.match(path.name)
        if found is None or not path.is_dir() or running(int(found.group(1))):
            continue
        try:
            shutil.rmtree(path)
        except OSError as exc:  # another process swept it first, or it is not ours to remove
            log.warning("could not remove the orphaned scratch directory %s: %s", path, exc)
            continue
        log.info("removed %s, left by process %s", path, found.group(1))
        removed.append(path)
    return removed


def scratch_dir(kind: str, directory: Path | None = None) -> tempfile.TemporaryDirectory[str]:
    """A new ``kind`` scratch directory owned by this process (deleted when the returned object is cleaned
    up), after sweeping the ones dead processes left."""
    sweep_orphans(kind, directory)
    return tempfile.TemporaryDirectory(prefix=f"{PREFIX}{kind}-{os.getpid()}-", dir=directory)
