"""Test-wide setup: a private PREFECT_HOME, analytics off, one Prefect harness for the whole session."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="payops-prefect-test-"))
os.environ["PREFECT_HOME"] = str(_HOME)
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ["PREFECT_SERVER_UI_ENABLED"] = "false"
for _key in [k for k in os.environ if k.startswith("PAYOPS_")]:
    del os.environ[_key]
os.environ["PAYOPS_HOME"] = str(_HOME / "payops")  # the payops database and caches of this test session
# A `payops serve` someone runs on this machine is not this session's server: never borrow it.
os.environ["PAYOPS_SERVE_API_URL"] = "http://127.0.0.1:9/api"


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server for every test that runs flows (~15 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
