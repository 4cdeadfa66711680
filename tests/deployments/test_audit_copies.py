"""`payops audit verify` also checks each entry against its copy in Prefect's events: deleting the newest
entries (which leaves a valid, shorter chain) or re-chaining an edit is caught there."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from payops.deployments.cli import app
from payops.store import PayopsSettings, upgrade_database
from payops.tasks.events.auditing import Auditor
from sqlalchemy import text
from typer.testing import CliRunner

pytestmark = pytest.mark.e2e


def test_verify_finds_a_deleted_tail_through_the_prefect_events(
    prefect_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from payops.tasks.events.auditing import event_copies
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))  # its own chain (and audit key)
    monkeypatch.setenv("PAYOPS_DATABASE_URL", f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    settings = PayopsSettings.from_env()
    engine = upgrade_database(settings)
    auditor = Auditor(engine, emit_event, key=settings.audit_key_bytes())
    for i in range(3):
        auditor.record("ada", "user.added", f"user:u{i}", "cli")
    EventsWorker.drain_all()
    deadline = time.monotonic() + 60
    while len(asyncio.run(event_copies(auditor.chain))) < 3:  # the server writes them a moment later
        assert time.monotonic() < deadline, "the audit events never reached Prefect"
        time.sleep(0.5)

    result = CliRunner().invoke(app, ["audit", "verify"])
    assert result.exit_code == 0
    assert "audit trail intact: 3 entries; 3 compared with their Prefect events" in result.output
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE seq = 3"))
    engine.dispose()
    result = CliRunner().invoke(app, ["audit", "verify"])
    assert result.exit_code == 1
    deleted = "audit trail broken: entry 3: in the Prefect events but not in the database (deleted)"
    assert deleted in result.output
