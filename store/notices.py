"""Notices for console users: what waits for them (a run to approve, a reminder before it expires, an expiry).

Written by the payout flow, shown in the console to the users of the notice's role who may act on it (never
to the run's initiator or uploader), closed when the run is decided or expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from payops.store.database import Base
from payops.store.users import utcnow
from sqlalchemy import DateTime, Engine, Integer, String, Text, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

KINDS = ("approval_needed", "approval_reminder", "approval_expired")


class Notice(Base):
    __tablename__ = "notices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    flow_run_id: Mapped[str] = mapped_column(String(36), index=True)
    label: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    excluded: Mapped[str] = mapped_column(Text, default="")
    closed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True, index=True)


@dataclass(frozen=True)
class NoticeView:
    id: int
    created_at: datetime
    kind: str
    flow_run_id: str
    label: str
    text: str
    open: bool


class Notices:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def post(
        self, kind: str, flow_run_id: str, label: str, text: str, *, role: str, excluded: tuple[str, ...] = ()
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"notice kind {kind!r} is not one of {', '.join(KINDS)}")
        with Session(self.engine) as db, db.begin():
            db.add(
                Notice(
                    created_at=utcnow(),
                    kind=kind,
                    flow_run_id=flow_run_id,
                    label=label[:64],
                    text=text,
                    role=role,
                    excluded=",".join(excluded),
                )
            )

    def close_run(self, flow_run_id: str) -> None:
        """Close every open notice about a run (decided, expired)."""
        with Session(self.engine) as db, db.begin():
            db.execute(
                update(Notice)
                .where(Notice.flow_run_id == flow_run_id, Notice.closed_at.is_(None))
                .values(closed_at=utcnow())
            )

    def for_user(self, name: str, role: str, *, open_only: bool = True, limit: int = 50) -> list[NoticeView]:
        """The notices meant for this user: their role, and they are not excluded from acting on the run."""
        query = select(Notice).where(Notice.role == role).order_by(Notice.id.desc()).limit(limit * 4)
        if open_only:
            query = query.where(Notice.closed_at.is_(None))
        with Session(self.engine) as db:
            rows = [n for n in db.scalars(query) if name not in n.excluded.split(",")][:limit]
            return [
                NoticeView(n.id, n.created_at, n.kind, n.flow_run_id, n.label, n.text, n.closed_at is None)
                for n in rows
            ]
