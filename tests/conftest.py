"""Test-wide setup: a private PREFECT_HOME, analytics off, one Prefect harness for the whole session."""

from __future__ import annotations

import os
import secrets
import shutil
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
# The payops database, caches and keys of this test session; a `payops serve` someone runs on this machine
# belongs to another home, so no command of this session finds it.
os.environ["PAYOPS_HOME"] = str(_HOME / "payops")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's PREFECT_HOME and payops home go with it (a leftover is reported, not fatal)."""

    def report(function: object, path: str, exc_info: object) -> None:
        print(f"could not remove the test session's home {path}: {exc_info}")

    shutil.rmtree(_HOME, onerror=report)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server for every test that runs flows (~15 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


OPERATOR = "ci-operator"


@pytest.fixture(scope="session", autouse=True)
def payops_policy_and_operator() -> Iterator[None]:
    """The session's payops database states its approval policy explicitly, "none": the tests of approvals
    set their own (a new install's default asks one approver for every run). CLI commands that start runs
    do so as the operator ``ci-operator``, through its personal API token (PAYOPS_API_TOKEN)."""
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.users import Users

    engine = upgrade_database(PayopsSettings.from_env())  # as `payops serve` does for its home
    state_policy(engine, "none")
    users = Users(engine)
    users.add(OPERATOR, "operator", secrets.token_urlsafe(18))
    os.environ["PAYOPS_API_TOKEN"] = users.issue_token(OPERATOR, "tests")
    yield


LONGEST_FIRST = (
    "tests/deployments/test_scaleout.py",
    "tests/deployments/test_scaleout_approvals.py",
    "tests/deployments/test_approval_channels.py",
    "tests/deployments/test_payops_homes.py",
    "tests/flows/test_payout_crash.py",
    "tests/deployments/test_prefect_ui_operator.py",
    "tests/deployments/test_console_browser.py",
    "tests/deployments/test_serve_all_in_one.py",
    "tests/deployments/test_console_hr_export.py",
    "tests/deployments/test_process_ownership.py",
)
"""The longest files (minutes each), collected first: `make test` hands each xdist worker the next file as it
frees up, so none of them starts last and runs alone at the end of the suite (with
`--no-loadscope-reorder`: xdist otherwise sorts the files by their number of tests, and these have few)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of `LONGEST_FIRST` to the front, in that order; every other test keeps its place (a
    stable sort: the shuffled runs stay shuffled)."""
    first = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))
