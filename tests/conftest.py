"""Test-wide setup: a private PREFECT_HOME, analytics off, one Prefect harness for the whole session."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

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


_harness_up = False


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server for every test that runs flows, on a migrated copy of its database
    (tests/prefect_template.py: ~7 s to start instead of ~18)."""
    global _harness_up
    from tests.prefect_template import seeded_test_harness

    with seeded_test_harness(server_startup_timeout=120):
        _harness_up = True
        try:
            yield
        finally:
            _harness_up = False


def _waiting_flow_runs() -> dict[UUID, str]:
    """The session server's flow runs that wait (paused, suspended or scheduled): id -> name and state."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    waiting = FlowRunFilterStateType(any_=[StateType.PAUSED, StateType.SCHEDULED])
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=waiting)))
    return {r.id: f"{r.name} ({r.state.name if r.state else '?'})" for r in runs}


@pytest.fixture(scope="module", autouse=True)
def leaves_no_flow_run_waiting() -> Iterator[None]:
    """A test file leaves no flow run of its own waiting on the session's Prefect server: a later file on
    the same worker would see it (a wallet watch counted two suspended payout runs another file left as
    upcoming, and failed). Those left are cancelled and the file's teardown errs, naming them, so the leak
    shows where it is made, whatever order the files run in."""
    before = _waiting_flow_runs() if _harness_up else {}
    yield
    if not _harness_up:
        return
    left = {k: v for k, v in _waiting_flow_runs().items() if k not in before}
    if not left:
        return
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    with get_client(sync_client=True) as client:
        for run_id in left:
            client.set_flow_run_state(run_id, Cancelled(message="left waiting by a test file"), force=True)
    pytest.fail(
        f"this file left {len(left)} flow run(s) waiting on the session's server: {sorted(left.values())}"
    )


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


SHUFFLED = (
    "tests/architecture/",
    "tests/connectors/",
    "tests/store/",
    "tests/tasks/",
    "tests/deployments/test_alerts_e2e.py",
)
"""The tests `make test` shuffles (`--shuffle-seed`): their modules' order and the order of the tests in each.
Every test passes alone and in any order; these are proven so on every run, the end-to-end files (minutes of
servers and workers each) keep their file order."""

LONGEST_FIRST = (
    "tests/deployments/test_scaleout.py",
    "tests/deployments/test_scaleout_approvals.py",
    "tests/deployments/test_approval_channels.py",
    "tests/deployments/test_payops_homes.py",
    "tests/deployments/test_run_stuck_starting.py",
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle-seed",
        type=int,
        default=None,
        help="shuffle the SHUFFLED tests (tests/conftest.py) with this seed: the run prints it to replay",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle-seed")
    return None if seed is None else f"shuffled: {' '.join(SHUFFLED)} (--shuffle-seed={seed})"


def _path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def shuffled(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """``items`` with the tests of `SHUFFLED` shuffled among the places they hold: their modules' order, and
    the tests' order within each module (what pytest-random-order's module bucket does, for a part of the
    session only: it shuffles a whole session, and the end-to-end files run in the same xdist session so
    their waits fill with these). The same seed gives the same order in every xdist worker."""
    rng = random.Random(seed)
    places = [i for i, item in enumerate(items) if _path(item).startswith(SHUFFLED)]
    modules: dict[str, list[pytest.Item]] = {}
    for i in places:
        modules.setdefault(_path(items[i]), []).append(items[i])
    order = list(modules.values())
    rng.shuffle(order)
    for tests in order:
        rng.shuffle(tests)
    out = list(items)
    for i, item in zip(places, [item for tests in order for item in tests], strict=True):
        out[i] = item
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Shuffle the `SHUFFLED` tests when asked (`--shuffle-seed`), then move the tests of `LONGEST_FIRST` to
    the front, in that order; every other test keeps its place (a stable sort)."""
    seed = config.getoption("--shuffle-seed")
    if seed is not None:
        items[:] = shuffled(items, seed)
    first = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(_path(item), len(first)))
