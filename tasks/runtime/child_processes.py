"""Children that end with their parent: the Linux parent-death signal, set from Python with ctypes.

``prctl(PR_SET_PDEATHSIG)`` has no binding in the standard library (psutil has none either); it is one libc
call. On other systems the functions do nothing and the parents' own cleanup (terminate on exit) remains.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL, parent_pid: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies; True when that is in place.

    With ``parent_pid`` the process exits at once when its parent is already gone (it died before the
    request took effect). The signal follows the parent *thread* that started the process: start children
    from a thread that outlives them.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return False  # not glibc Linux
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
    return True


def preexec_own_group_dying_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` for long-lived children (servers): their own process group (so a stop reaches their
    children too) and SIGTERM when this process dies (checked against this process's pid, so a parent that
    died during the fork is noticed)."""
    parent = os.getpid()

    def setup() -> None:  # pragma: no cover - runs in the child between fork and exec
        os.setsid()
        die_with_parent(signal.SIGTERM, parent)

    return setup
