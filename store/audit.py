"""The audit trail: an append-only table whose entries are chained by a keyed hash (HMAC-SHA256).

Each entry stores the hash of the previous entry and its own HMAC over (previous hash, its fields), so editing
or deleting a row breaks the chain at that row (:func:`verify`). The key lives outside the database
(``PAYOPS_AUDIT_KEY``, else the file ``audit.key`` in the payops home, made on first use with mode 0600:
`store.settings.PayopsSettings.audit_key_bytes`; every function here takes it as ``key``): who
can write the database but not read the key cannot edit a row and re-chain the rest. Entries are numbered 1,
2, 3... and the number is the primary key: two writers appending at once collide on it and the loser retries
with the new tail, so the chain stays linear on SQLite and PostgreSQL alike. Removing the newest entries
leaves a valid, shorter chain; the Prefect event emitted for every entry (tasks/events/auditing.py) is the
outside copy that :func:`verify` also compares when given it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from payops.store.database import Base
from payops.store.users import utcnow
from sqlalchemy import DateTime, Engine, Integer, String, Text, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

GENESIS = "0" * 64


class AuditEntry(Base):
    __tablename__ = "audit_log"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(DateTime, index=True)
    actor: Mapped[str] = mapped_column(String(64), index=True)
    client: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64), index=True)
    object: Mapped[str] = mapped_column(String(255))
    detail: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


def chain_id(key: bytes) -> str:
    """A public name of the chain a key signs (never the key): tells this chain's outside copies from
    another installation's on a shared Prefect server."""
    return hmac.new(key, b"payops.audit.chain", hashlib.sha256).hexdigest()[:16]


def entry_hash(
    key: bytes,
    prev_hash: str,
    seq: int,
    at: datetime,
    actor: str,
    client: str,
    action: str,
    obj: str,
    detail: str,
) -> str:
    body = json.dumps([seq, at.isoformat(), actor, client, action, obj, detail], ensure_ascii=False)
    return hmac.new(key, (prev_hash + body).encode(), hashlib.sha256).hexdigest()


def append(
    engine: Engine,
    actor: str,
    action: str,
    obj: str,
    client: str = "",
    detail: dict | None = None,
    *,
    key: bytes,
) -> AuditEntry:
    """Append one entry at the tail of the chain, hashed under ``key``; returns it."""
    text = json.dumps(detail or {}, sort_keys=True, default=str, ensure_ascii=False)
    for _ in range(50):
        with Session(engine) as db:
            tail = db.scalar(select(AuditEntry).order_by(AuditEntry.seq.desc()).limit(1))
            seq, prev = (tail.seq + 1, tail.hash) if tail else (1, GENESIS)
            at = utcnow()
            entry = AuditEntry(
                seq=seq,
                at=at,
                actor=actor[:64],
                client=client[:64],
                action=action[:64],
                object=obj[:255],
                detail=text,
                prev_hash=prev,
                hash=entry_hash(key, prev, seq, at, actor[:64], client[:64], action[:64], obj[:255], text),
            )
            db.add(entry)
            try:
                db.commit()
            except IntegrityError:  # another writer took this number: retry on the new tail
                db.rollback()
                continue
            db.refresh(entry)
            db.expunge(entry)
            return entry
    raise RuntimeError("the audit trail is too busy: could not append an entry")


@dataclass
class Verdict:
    entries: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(engine: Engine, copies: Iterable[tuple[int, str]] | None = None, *, key: bytes) -> Verdict:
    """Walk the chain; every break (edited, deleted or inserted row) is one problem naming the entry.

    ``copies``: ``(seq, hash)`` of the entries' outside copies (the Prefect events); an entry whose hash
    differs from its copy, or a copy with no entry (the newest entries deleted), is a problem too."""
    problems: list[str] = []
    hashes: dict[int, str] = {}
    prev, expected, count = GENESIS, 1, 0
    with Session(engine) as db:
        for e in db.scalars(select(AuditEntry).order_by(AuditEntry.seq)).yield_per(1000):
            count += 1
            if e.seq != expected:
                problems.append(f"entries {expected}..{e.seq - 1} are missing (deleted)")
            if e.prev_hash != prev:
                problems.append(f"entry {e.seq}: does not follow the entry before it (edited or deleted)")
            at = e.at.replace(tzinfo=None)
            fields = (e.prev_hash, e.seq, at, e.actor, e.client, e.action, e.object, e.detail)
            if not hmac.compare_digest(entry_hash(key, *fields), e.hash):
                problems.append(f"entry {e.seq}: its content does not match its keyed hash (edited)")
            if copies is not None:
                hashes[e.seq] = e.hash
            prev, expected = e.hash, e.seq + 1
    for seq, copy_hash in sorted(set(copies or ())):
        if seq not in hashes:
            problems.append(f"entry {seq}: in the Prefect events but not in the database (deleted)")
        elif hashes[seq] != copy_hash:
            problems.append(f"entry {seq}: differs from its copy in the Prefect events (edited)")
    return Verdict(count, problems)


def search(
    engine: Engine,
    *,
    actor: str | None = None,
    action: str | None = None,
    text: str | None = None,
    limit: int | None = 500,
) -> list[AuditEntry]:
    """Newest first, filtered by exact actor, action prefix and a substring of the object."""
    query = select(AuditEntry).order_by(AuditEntry.seq.desc())
    if actor:
        query = query.where(AuditEntry.actor == actor)
    if action:
        query = query.where(AuditEntry.action.startswith(action, autoescape=True))
    if text:
        query = query.where(AuditEntry.object.contains(text, autoescape=True))
    if limit:
        query = query.limit(limit)
    with Session(engine) as db:
        rows = list(db.scalars(query))
        db.expunge_all()
        return rows


def count(engine: Engine) -> int:
    with Session(engine) as db:
        return int(db.scalar(select(func.count()).select_from(AuditEntry)) or 0)
