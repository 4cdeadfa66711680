"""`payops db`: a database behind this payops' schema is refused by every command but `payops db upgrade`
(and `payops serve`), in one line naming it (never its password) and the command to run, exit 2; a new
home's empty database is created at the newest revision by the first command that opens it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from payops.deployments.cli import app
from payops.store.database import SCHEMA_HEADS, open_engine, recorded_revisions
from typer.testing import CliRunner

from tests.store.test_database import _behind

HEAD = ", ".join(sorted(SCHEMA_HEADS))


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _revisions(url: str) -> frozenset[str]:
    engine = open_engine(url)
    try:
        return recorded_revisions(engine)
    finally:
        engine.dispose()


LOCAL_COMMANDS = [["cache", "clear"], ["audit", "list"], ["host", "policy", "--set", "none"]]


@pytest.mark.parametrize("command", LOCAL_COMMANDS)
def test_a_command_refuses_a_database_behind_and_upgrade_brings_it_up(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'payops.sqlite3'}"
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PAYOPS_DATABASE_URL", url)
    _behind(url)
    code, out = _invoke(*command)
    assert code == 2, out
    assert out.strip() == (
        f"error: the payops database {url} is at revision 0003_lookup_cache, this payops needs {HEAD}:"
        " run `payops db upgrade` (or `payops serve`, which upgrades it)"
    )
    assert _revisions(url) == {"0003_lookup_cache"}  # refused, never migrated behind the user's back
    code, out = _invoke("db", "current")
    assert code == 2 and "revision: 0003_lookup_cache" in out and "behind: run `payops db upgrade`" in out
    code, out = _invoke("db", "upgrade")
    assert code == 0 and out.strip() == f"{url}: at {HEAD} (locally, audited as host:{os.getuid()})"
    assert _revisions(url) == SCHEMA_HEADS
    code, out = _invoke(*command)
    assert code == 0, out


def test_a_new_home_is_created_at_the_newest_revision_by_its_first_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PAYOPS_DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'home' / 'payops.sqlite3'}"
    code, out = _invoke("db", "current")  # looking does not create the schema
    assert code == 0 and "none (empty)" in out and _revisions(url) == frozenset()
    code, out = _invoke("audit", "list")  # the host's first command without a server
    assert code == 0, out
    assert _revisions(url) == SCHEMA_HEADS
