"""`payops cache clear` empties the lookup cache of the configured database, and fails in one clear line."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from payops.deployments.cli import app
from payops.store import PayopsSettings, migrate, upgrade_database
from payops.store.cache import NAMES, Cached, LookupCache, cache_key
from typer.testing import CliRunner


def test_cache_clear_empties_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PAYOPS_DATABASE_URL", raising=False)
    engine = upgrade_database(PayopsSettings.from_env())
    migrate(engine)
    cache = LookupCache(engine)
    keys = [cache_key("msisdn", "mtn", f"23324111000{i}") for i in range(3)]
    cache.put_many(NAMES, {k: Cached("Ama Mensah", True) for k in keys}, lambda _: timedelta(days=7))
    try:
        result = CliRunner().invoke(app, ["cache", "clear"])
        assert result.exit_code == 0, result.output
        assert "3 entries removed" in result.output
        assert cache.get_many(NAMES, keys) == {}
    finally:
        engine.dispose()


def test_a_bad_database_url_is_one_line_without_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_DATABASE_URL", "not a url:hunter2")
    result = CliRunner().invoke(app, ["cache", "clear"])
    assert result.exit_code == 1
    assert "cannot open the payops database" in result.output and "PAYOPS_DATABASE_URL" in result.output
    assert "hunter2" not in result.output and "Traceback" not in result.output
