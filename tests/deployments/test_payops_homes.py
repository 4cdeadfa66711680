"""Two payops homes on one host, each with its `payops serve --sandbox`: free ports of their own, and every
command run with a home (no PREFECT_API_URL) finds that home's serve in its record. Runs, lookup caches,
approval keys and consoles stay apart, even under one run label."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from payops.store.home import read_serve_record
from payops.tasks.approval.approval_keys import SIGNING_KEY_FILE, VERIFY_KEY_FILE

from tests.deployments.console_harness import PASSWORD
from tests.deployments.serve_harness import AllInOne, all_in_one, prefect_login_header
from tests.flows.support import payroll_rows, write_sheet

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

LABEL = "payroll-shared-label"


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[tuple[AllInOne, AllInOne]]:
    settings = {"PREFECT_SERVER_UI_ENABLED": "false"}
    with (
        all_in_one(tmp_path / "a", {"olu": "operator"}, settings, policy="none") as a,
        all_in_one(tmp_path / "b", {"olu": "operator"}, settings, policy="none") as b,
    ):
        yield a, b


def _pay(home: AllInOne, sheet: Path, *options: str) -> tuple[int, dict, str]:
    """`payops payouts` as the home's operator olu (password on stdin)."""
    args = ["payouts", str(sheet), "--label", LABEL, "--json", "--user", "olu", *options]
    done = home.payops(*args, env=home.emulator_env(), stdin=PASSWORD + "\n")
    summary = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else {}
    return done.returncode, summary, done.stderr


def test_two_homes_on_one_host_never_see_each_others_runs_caches_keys_or_consoles(
    homes: tuple[AllInOne, AllInOne], tmp_path: Path
) -> None:
    a, b = homes
    # Ports picked per home, and each serve says where everything is.
    assert not set(a.ports.values()) & set(b.ports.values()), (a.ports, b.ports)
    for home in (a, b):
        record = read_serve_record(home.payops_home)
        assert record is not None and record.pid == home.proc.pid
        text = home.log.read_text()
        assert f"console: {home.console}" in text and f"client settings: {record.sandbox_env_file}" in text
        assert f"approval verify key: {home.payops_home / VERIFY_KEY_FILE}" in text
        assert (home.payops_home / SIGNING_KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert (a.payops_home / VERIFY_KEY_FILE).read_text() != (b.payops_home / VERIFY_KEY_FILE).read_text()

    # One label in both homes: each home's CLI pays on its own serve (no PREFECT_API_URL anywhere).
    ids = {}
    for home, prefix in ((a, "HA"), (b, "HB")):
        sheet = write_sheet(tmp_path / f"{prefix}.xlsx", payroll_rows(3, prefix=prefix))
        code, summary, stderr = _pay(home, sheet)
        assert code == 0 and summary["outcome"] == "completed", stderr
        assert "starting a local Prefect server" not in stderr  # found its serve, started none
        listed = home.payops("runs", "--json", as_user="olu")
        assert listed.returncode == 0, listed.stderr
        (run,) = [r for r in json.loads(listed.stdout) if r["label"] == LABEL]
        ids[home.payops_home] = run["id"]
    id_a, id_b = ids[a.payops_home], ids[b.payops_home]
    assert id_a != id_b
    assert a.prefect("GET", f"/flow_runs/{id_a}").status_code == 200
    assert b.prefect("GET", f"/flow_runs/{id_a}").status_code == 404  # B's server never saw it
    # Each home's Prefect has its own login: without one, or with the other home's, it is refused.
    assert a.auth_string != b.auth_string
    assert httpx.get(f"{a.api}/flow_runs/{id_a}", timeout=10).status_code == 401
    other = prefect_login_header(b.auth_string)
    assert httpx.get(f"{a.api}/flow_runs/{id_a}", headers=other, timeout=10).status_code == 401

    # Consoles: each lists its own home's run.
    for home, mine, other in ((a, id_a, id_b), (b, id_b, id_a)):
        client = home.console_client("olu")
        page = client.get("/runs").text
        client.close()
        assert mine in page and other not in page

    # Lookup caches: clearing A's leaves B's (both were filled by the name check of their runs).
    cleared_a = a.payops("cache", "clear")
    assert cleared_a.returncode == 0 and " 0 entries" not in cleared_a.stdout, cleared_a.stdout
    assert "0 entries removed" in a.payops("cache", "clear").stdout
    cleared_b = b.payops("cache", "clear")
    assert cleared_b.returncode == 0 and " 0 entries" not in cleared_b.stdout, cleared_b.stdout

    # Keys: through the home's server, a run needing approval is signed and waits (then times out: not
    # approved, exit 3) instead of stopping with "no approval verify key".
    sheet = write_sheet(tmp_path / "approve.xlsx", payroll_rows(2, prefix="HK"))
    code, summary, stderr = _pay(a, sheet, "--require-approval", "--approval-timeout", "10")
    assert code == 3 and summary["outcome"] == "not_approved", stderr
    assert "approval verify key" not in stderr
    # `payops approve` goes to the home's server, which checks the password (wrong here).
    approve = a.payops("approve", id_a, "--user", "olu", stdin="not the password\n")
    assert approve.returncode == 2 and "wrong user name or password" in approve.stderr, approve.stderr
