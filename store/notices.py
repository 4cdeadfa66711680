"""Notices for console users: what waits for them, and what became of the runs they started.

Two kinds of recipient:

- **a role** (``role``, no ``user``): a run to approve, a reminder before it expires, an expiry. Shown to the
  users of that role who may act on it (never to the run's initiator or uploader: ``excluded``), closed
  when the run is decided or expires.
- **one user** (``user``): the outcome of a run they started or whose sheet they uploaded: approved,
  rejected (with the approver's comment), not approved in time, completed (its figures), failed. Shown to
  that user only, whatever their role; open ("new") until they open their notices page.

A notice's text is written for a person by the flow (`tasks.approval.outcome_notices`); the console escapes
it like any other text. It never carries a secret, a payee's number or a row's reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from payops.store.database import Base
from payops.store.users import utcnow
from sqlalchemy import DateTime, Engine, Integer, String, Text, and_, or_, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

ROLE_KINDS = ("approval_needed", "approval_reminder", "approval_expired")
"""Notices for the users of a role who may act on a run."""
OUTCOME_KINDS = ("run_approved", "run_rejected", "run_not_approved", "run_completed", "run_failed")
"""Notices for one user: what became of a run they started or uploaded."""
KINDS = (*ROLE_KINDS, *OUTCOME_KINDS)
MAX_TEXT = 2000
"""A notice's text is cut to this many characters (a comment quoted in it is capped before)."""


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
    user: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)


@dataclass(frozen=True)
class NoticeView:
    id: int
    created_at: datetime
    kind: str
    flow_run_id: str
    label: str
    text: str
    open: bool
    personal: bool = False
    """For this user alone (a run's outcome); else for their role (a run to approve)."""


def _view(n: Notice) -> NoticeView:
    return NoticeView(
        n.id, n.created_at, n.kind, n.flow_run_id, n.label, n.text, n.closed_at is None, n.user is not None
    )


def recipients(*names: str | None) -> tuple[str, ...]:
    """The distinct named users among ``names`` (an initiator and an uploader, either may be missing), in
    order."""
    return tuple(dict.fromkeys(n for n in names if n))


class Notices:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def post(
        self,
        kind: str,
        flow_run_id: str,
        label: str,
        text: str,
        *,
        role: str = "",
        excluded: tuple[str, ...] = (),
        user: str | None = None,
    ) -> None:
        """One notice, for the users of ``role`` (but not ``excluded``) or for ``user`` alone."""
        if kind not in KINDS:
            raise ValueError(f"notice kind {kind!r} is not one of {', '.join(KINDS)}")
        if bool(role) == bool(user):
            raise ValueError("a notice is for a role or for one user")
        with Session(self.engine) as db, db.begin():
            db.add(
                Notice(
                    created_at=utcnow(),
                    kind=kind,
                    flow_run_id=flow_run_id,
                    label=label[:64],
                    text=text[:MAX_TEXT],
                    role=role,
                    excluded=",".join(excluded),
                    user=user,
                )
            )

    def tell(self, kind: str, flow_run_id: str, label: str, text: str, users: Iterable[str | None]) -> int:
        """The same notice for each named user (once each); returns how many were posted."""
        names = recipients(*users)
        for name in names:
            self.post(kind, flow_run_id, label, text, user=name)
        return len(names)

    def close_run(self, flow_run_id: str) -> None:
        """Close every open notice about a run for a role (decided, expired); a user's own notices stay new
        until they read them."""
        with Session(self.engine) as db, db.begin():
            db.execute(
                update(Notice)
                .where(Notice.flow_run_id == flow_run_id, Notice.closed_at.is_(None), Notice.user.is_(None))
                .values(closed_at=utcnow())
            )

    def mark_read(self, name: str) -> None:
        """The user has seen their own notices (their notices page): they are no longer new."""
        with Session(self.engine) as db, db.begin():
            db.execute(
                update(Notice)
                .where(Notice.user == name, Notice.closed_at.is_(None))
                .values(closed_at=utcnow())
            )

    def for_user(self, name: str, role: str, *, open_only: bool = True, limit: int = 50) -> list[NoticeView]:
        """The notices meant for this user: their own, and their role's where they are not excluded from
        acting on the run."""
        mine = or_(Notice.user == name, and_(Notice.user.is_(None), Notice.role == role))
        query = select(Notice).where(mine).order_by(Notice.id.desc()).limit(limit * 4)
        if open_only:
            query = query.where(Notice.closed_at.is_(None))
        with Session(self.engine) as db:
            rows = [n for n in db.scalars(query) if n.user or name not in n.excluded.split(",")][:limit]
            return [_view(n) for n in rows]
