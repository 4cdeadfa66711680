"""A private PostgreSQL cluster for a Prefect server: Debian's binaries, a temp folder, 127.0.0.1, free port.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres`` system user (created by
Debian's package). ``ensure_postgres()`` installs the package with apt-get when the binaries are missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from payops.deployments.processes import start_child, stop_child

PG_ROOT = Path("/usr/lib/postgresql")


def postgres_bin() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/<version>/bin``."""
    if not PG_ROOT.is_dir():
        return None
    versions = sorted(
        (p for p in PG_ROOT.iterdir() if (p / "bin" / "initdb").exists()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    )
    return versions[-1] / "bin" if versions else None


def ensure_postgres() -> Path:
    """PostgreSQL's bin folder; installs Debian's ``postgresql`` (as root) when missing."""
    found = postgres_bin()
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError("PostgreSQL is not installed: sudo apt-get install -y postgresql")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "postgresql"], check=True, env=env, capture_output=True
    )
    found = postgres_bin()
    if not found:
        raise RuntimeError("apt-get installed postgresql but no initdb was found")
    return found


class PrivatePostgres:
    """``with PrivatePostgres(port) as pg: pg.url`` → ``postgresql+asyncpg://prefect:…@127.0.0.1:PORT/prefect``."""

    def __init__(self, port: int, password: str = "prefect-loopback") -> None:
        self.port = port
        self.password = password
        self.bin = ensure_postgres()
        self.dir = Path(tempfile.mkdtemp(prefix="payops-pg-"))
        self.data = self.dir / "data"
        self.proc: subprocess.Popen[bytes] | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://prefect:{self.password}@127.0.0.1:{self.port}/prefect"

    def _run(self, *cmd: str, stdin: str | None = None) -> None:
        subprocess.run(
            [*self._as_user, *cmd], check=True, capture_output=True, input=stdin, text=True, cwd=self.dir
        )

    def start(self, timeout: float = 60) -> PrivatePostgres:
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as_user:
            shutil.chown(pwfile, "postgres", "postgres")
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "prefect",
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        cmd = [
            *self._as_user,
            str(self.bin / "postgres"),
            "-D",
            str(self.data),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-k",
            str(self.dir),
            "-c",
            "max_connections=200",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]
        self.proc = start_child(cmd, os.environ, self.dir / "postgres.log", cwd=self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.dir / 'postgres.log').read_text()[-800:]}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            )
            if ready.returncode == 0:
                env = {**os.environ, "PGPASSWORD": self.password}
                subprocess.run(
                    [
                        str(self.bin / "createdb"),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                        "-U",
                        "prefect",
                        "prefect",
                    ],
                    check=True,
                    capture_output=True,
                    env=env,
                )
                return self
            time.sleep(0.3)
        raise RuntimeError("postgres did not start")

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc, timeout=20, sig=signal.SIGINT)  # fast shutdown
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
