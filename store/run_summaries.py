"""The summary each payout run ended with, by flow run id: what the payops server answers when a person (the
CLI, the API) asks how their run ended, wherever the run was executed.

The flow writes it once at its end (a Prefect retry of the same flow run writes it again); the server reads
it. It is the run's own report of itself (outcome, counts, errors by row and column), never the state of
money: the Payments Service stays the truth for that.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from payops.store.database import Base, upsert_insert
from payops.store.users import utcnow
from sqlalchemy import DateTime, Engine, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column


class RunSummaryRecord(Base):
    __tablename__ = "run_summaries"

    flow_run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    label: Mapped[str | None] = mapped_column(String(200), index=True, nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(32), nullable=True)
    summary: Mapped[str] = mapped_column(Text)
    written_at: Mapped[datetime] = mapped_column(DateTime)


class RunSummaries:
    """Run summaries on one engine (blocking calls: async callers use a thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def keep(self, flow_run_id: str, summary: dict[str, Any]) -> None:
        """Keep (or replace) the summary of one flow run, as its JSON (the ``--json`` output)."""
        text = json.dumps(summary, default=str)
        values = {
            "flow_run_id": flow_run_id,
            "label": summary.get("label"),
            "outcome": summary.get("outcome"),
            "summary": text,
            "written_at": utcnow(),
        }
        statement = upsert_insert(self.engine, RunSummaryRecord.__table__).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=["flow_run_id"],
            set_={k: values[k] for k in ("label", "outcome", "summary", "written_at")},
        )
        with self.engine.begin() as connection:
            connection.execute(statement)

    def get(self, flow_run_id: str) -> dict[str, Any] | None:
        """The summary one flow run ended with, in the order the flow wrote it; None when it has none."""
        with Session(self.engine) as db:
            which = RunSummaryRecord.flow_run_id == flow_run_id
            text = db.scalar(select(RunSummaryRecord.summary).where(which))
        if text is None:
            return None
        data = json.loads(text)
        return data if isinstance(data, dict) else None
