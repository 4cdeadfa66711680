"""The scale-out recipe on one machine: PostgreSQL, a Prefect server on it, a process work pool with N
workers, the ``payments-api`` global rate limit, and deployments/prefect.yaml's payout deployment (or all).

    python -m payops.deployments.scaleout.loopback --workers 2 --limit 10 --env-file .sandbox.env

runs it until Ctrl-C (docs/operations.md, "Scale-out"). ``tests/deployments/test_scaleout.py`` uses the same
``LoopbackCluster`` to prove that three payout runs on two workers stay under one request rate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from payops.deployments.processes import (
    ROOT,
    Supervisor,
    free_port,
    prefect_cli,
    prefect_server_command,
    prefect_server_env,
    read_env_file,
    wait_http,
)
from payops.deployments.scaleout.postgres import PrivatePostgres

POOL = "payops"
LIMIT_NAME = "payments-api"


class LoopbackCluster:
    """Everything of the recipe as child processes bound to 127.0.0.1; ``stop()`` ends them all."""

    def __init__(
        self,
        *,
        workers: int = 2,
        limit: int = 10,
        decay_per_s: float | None = None,
        worker_env: Mapping[str, str] | None = None,
        deployments: tuple[str, ...] | None = ("payout-spreadsheet",),
        log_dir: Path | None = None,
        variables: Mapping[str, str] | None = None,
        worker_python: Path | None = None,
    ) -> None:
        self.workers = workers
        self.limit = limit
        self.decay_per_s = decay_per_s if decay_per_s is not None else float(limit)
        self.worker_env = dict(worker_env or {})
        self.deployments = deployments  # names from prefect.yaml; None: `prefect deploy --all`
        self.variables = dict(variables or {})  # Prefect variables set before deploying (prefect.yaml's)
        # The workers' Python: by default this one; a venv with the payops wheel installed runs them as a
        # worker host does, away from any checkout (their working folder is their own).
        self.worker_python = worker_python
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="payops-scaleout-"))
        self.home = self.log_dir / "prefect-home"
        self.payops_home = self.log_dir / "payops-home"  # the cluster's own payops home (database, caches)
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.postgres = PrivatePostgres(free_port())
        self.sup = Supervisor(self.log_dir, say=lambda _: None)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment of a Prefect client process of this cluster."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PAYOPS_"))}
        env.update(
            {
                "PREFECT_API_URL": self.api_url,
                "PREFECT_HOME": str(self.home),
                # Never the home of whoever runs this (~/.payops): another checkout may have migrated it.
                "PAYOPS_HOME": str(self.payops_home),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_LOGGING_LEVEL": "WARNING",
            }
        )
        env.update(extra or {})
        return env

    def cli(self, *args: str, timeout: float = 120) -> str:
        """Run ``prefect <args>`` against the cluster; its output, or RuntimeError with the output."""
        proc = subprocess.run(
            [*prefect_cli(), "--no-prompt", *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"prefect {' '.join(args)} failed: {(proc.stdout + proc.stderr)[-1500:]}")
        return proc.stdout

    def start(self) -> LoopbackCluster:
        self.home.mkdir(parents=True, exist_ok=True)
        self.postgres.start()
        server_env = prefect_server_env("127.0.0.1", self.port, self.env())
        server_env.update(
            {"PREFECT_API_DATABASE_CONNECTION_URL": self.postgres.url, "PREFECT_SERVER_UI_ENABLED": "false"}
        )
        server_env.pop("PREFECT_API_URL", None)
        proc = self.sup.start("prefect-server", prefect_server_command(), server_env)
        wait_http(f"{self.api_url}/health", proc, 180, "the Prefect server")
        self.cli("work-pool", "create", POOL, "--type", "process")
        self.cli(
            "global-concurrency-limit",
            "create",
            LIMIT_NAME,
            "--limit",
            str(self.limit),
            "--slot-decay-per-second",
            str(self.decay_per_s),
        )
        for key, value in self.variables.items():
            self.cli("variable", "set", key, value)
        names = self.deployments
        which = ["--all"] if names is None else [arg for name in names for arg in ("--name", name)]
        self.cli("deploy", "--prefect-file", "deployments/prefect.yaml", *which, timeout=300)
        for i in range(1, self.workers + 1):
            cmd = [
                *([str(self.worker_python), "-m", "prefect"] if self.worker_python else prefect_cli()),
                "worker",
                "start",
                "--pool",
                POOL,
                "--type",
                "process",
                "--name",
                f"loopback-worker-{i}",
            ]
            env = self.env({"PREFECT_WORKER_QUERY_SECONDS": "1", **self.worker_env})
            if self.worker_python:
                env.pop("PYTHONPATH", None)
            here = self.log_dir / f"worker-{i}"
            here.mkdir(exist_ok=True)
            self.sup.start(f"worker-{i}", cmd, env, cwd=here if self.worker_python else ROOT)
        return self

    def stop(self) -> None:
        self.sup.stop_all()
        self.postgres.stop()

    def __enter__(self) -> LoopbackCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m payops.deployments.scaleout.loopback", description=__doc__
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=10, help="payments-api requests per second")
    parser.add_argument("--env-file", type=Path, help="PAYOPS_* export lines for the workers (sandbox)")
    args = parser.parse_args(argv)
    worker_env: dict[str, str] = {}
    if args.env_file:
        worker_env = read_env_file(args.env_file)
    cluster = LoopbackCluster(workers=args.workers, limit=args.limit, worker_env=worker_env)
    try:
        cluster.start()
        print(
            f"Prefect API {cluster.api_url} on PostgreSQL; pool {POOL!r} with {args.workers} workers; "
            f"limit {LIMIT_NAME!r} {args.limit}/s; logs in {cluster.log_dir}. Ctrl-C stops everything."
        )
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping ...")
    except RuntimeError as exc:
        print(f"error: {exc}")
        return 1
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
