"""Two workers share one lookup cache on PostgreSQL (as the scale-out setup runs it): what one worker looked
up, the other does not ask again; two workers filling it at once do not collide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.deployments.processes import free_port
from payops.deployments.scaleout.postgres import PrivatePostgres

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    with PrivatePostgres(free_port()) as pg:
        yield pg.url.replace("postgresql+asyncpg://", "postgresql+psycopg://")


def start_worker(url: str, seed: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PAYOPS_DATABASE_URL": url}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.cache_worker", str(seed)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def result(proc: subprocess.Popen[str]) -> dict:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def test_two_workers_share_the_cache_on_postgresql(database_url: str) -> None:
    first = [start_worker(database_url, seed) for seed in (0, 1)]  # both cold, at the same time
    a, b = (result(p) for p in first)
    assert a["lookups"].get("fresh", 0) + a["lookups"].get("cached", 0) == 50
    assert b["lookups"].get("fresh", 0) + b["lookups"].get("cached", 0) == 50
    later = result(start_worker(database_url, 2))  # another worker, new amounts, same payees
    assert later["lookups"] == {"cached": 50}
    assert "GET /v1/party-lookups" not in later["calls"]
    assert later["quotes"].get("fresh", 0) < (a["quotes"].get("fresh", 0) + a["quotes"].get("cached", 0))
