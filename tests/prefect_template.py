"""A Prefect database migrated once, copied for each Prefect server the tests start.

A Prefect server on a fresh SQLite file spends most of its start migrating it: 18 s of CPU against 7 s on a
migrated copy (measured on the 2-core CI machine, Prefect 3.8). The suite starts a dozen (the session harness
of each xdist worker, each `payops serve` of the end-to-end tests), so the migrated file is made once, under a
lock any test process may take, and copied. It is kept in the checkout's `.test-cache/` (git-ignored), one
file per Prefect version (its migrations are the version's). A home's first start from an empty database stays
tested: tests/deployments/test_serve_all_in_one.py starts its serve without a copy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".test-cache"


def template_db() -> Path:
    """The migrated Prefect database of this Prefect version, made on first use."""
    import prefect

    path = CACHE / f"prefect-{prefect.__version__}.db"
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    with (CACHE / "prefect-template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one test process migrates; the others wait, then copy
        if not path.exists():
            with tempfile.TemporaryDirectory(dir=CACHE) as work:
                made = Path(work) / "prefect.db"
                env = {
                    **os.environ,
                    "PREFECT_HOME": work,
                    "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{made}",
                }
                env.pop("PREFECT_API_URL", None)
                done = subprocess.run(
                    [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                    env=env, capture_output=True, text=True, timeout=300,
                )  # fmt: skip
                assert done.returncode == 0 and made.exists(), done.stdout[-2000:] + done.stderr[-2000:]
                os.replace(made, path)
    return path


def seed_prefect_db(path: Path) -> Path:
    """A copy of the migrated database at ``path`` (its folder made); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db(), path)
    return path


@contextmanager
def seeded_test_harness(server_startup_timeout: int = 120) -> Iterator[None]:
    """Prefect's `prefect_test_harness`, its temporary database a migrated copy. The harness names its
    database ``prefect-test.db`` in a folder from ``mkdtemp``: that folder is handed to it with the copy
    already in it (Prefect offers no setting for the harness's database)."""
    from unittest import mock

    from prefect.testing import utilities

    def seeded_dir() -> str:
        folder = tempfile.mkdtemp(prefix="prefect-test-")
        seed_prefect_db(Path(folder) / "prefect-test.db")
        return folder

    with ExitStack() as stack:
        with mock.patch.object(utilities, "mkdtemp", seeded_dir):  # only while the harness starts
            stack.enter_context(utilities.prefect_test_harness(server_startup_timeout=server_startup_timeout))
        yield
