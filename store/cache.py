"""Lookup and quote cache that outlives a run: holder names by number, fee quotes by priced input.

One table for both kinds. Keys are SHA-256 hashes of the numbers and inputs (never the numbers themselves);
values are what the service answered (a holder name, a fee) or a remembered failure. Each entry carries its
own expiry, set from the TTL of its kind when written, so a shorter TTL applies to failures and quotes. A
SQLite file under the payops home for one machine; PostgreSQL (``PAYOPS_DATABASE_URL``) for workers that
share it. Writes are upserts, so two workers storing the same key never collide.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from payops.store.database import Base, upsert_insert
from sqlalchemy import Boolean, DateTime, Engine, String, delete, select
from sqlalchemy.orm import Mapped, mapped_column

NAMES = "name"
QUOTES = "fee"


class LookupCacheEntry(Base):
    """One cached answer: `kind` (name or fee), the hash of its input, the answer or a failure, its expiry."""

    __tablename__ = "lookup_cache"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str | None] = mapped_column(String(255))
    ok: Mapped[bool] = mapped_column(Boolean)
    stored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


def cache_key(*parts: object) -> str:
    """SHA-256 of the parts (numbers, amounts, providers): the table never holds a number in clear."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Cached:
    """An answer from the cache: `value` when `ok`, else a remembered failure."""

    value: str | None
    ok: bool


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite returns naive datetimes


class LookupCache:
    """Reads and writes cached answers; `clock` is injectable so tests can move time."""

    def __init__(self, engine: Engine, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine = engine
        self.clock = clock

    def get_many(self, kind: str, keys: Iterable[str]) -> dict[str, Cached]:
        """The unexpired entries among `keys`."""
        keys = list(dict.fromkeys(keys))
        now = self.clock()
        found: dict[str, Cached] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):  # bounded IN lists
                rows = conn.execute(
                    select(
                        LookupCacheEntry.key,
                        LookupCacheEntry.value,
                        LookupCacheEntry.ok,
                        LookupCacheEntry.expires_at,
                    )
                    .where(LookupCacheEntry.kind == kind)
                    .where(LookupCacheEntry.key.in_(keys[start : start + 500]))
                )
                for key, value, ok, expires_at in rows:
                    if _aware(expires_at) > now:
                        found[key] = Cached(value, ok)
        return found

    def put_many(self, kind: str, entries: Mapping[str, Cached], ttl: Callable[[Cached], timedelta]) -> None:
        """Store (or replace) entries, each expiring `ttl(entry)` from now."""
        if not entries:
            return
        now = self.clock()
        rows = [
            {
                "kind": kind,
                "key": k,
                "value": c.value,
                "ok": c.ok,
                "stored_at": now,
                "expires_at": now + ttl(c),
            }
            for k, c in entries.items()
        ]
        with self.engine.begin() as conn:
            for start in range(0, len(rows), 500):
                stmt = upsert_insert(self.engine, LookupCacheEntry).values(rows[start : start + 500])
                stmt = stmt.on_conflict_do_update(
                    index_elements=["kind", "key"],
                    set_={c: stmt.excluded[c] for c in ("value", "ok", "stored_at", "expires_at")},
                )
                conn.execute(stmt)

    def clear(self) -> int:
        """Empty the cache; returns how many entries were removed."""
        with self.engine.begin() as conn:
            return conn.execute(delete(LookupCacheEntry)).rowcount or 0
