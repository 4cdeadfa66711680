"""The lookup cache table: hits, misses, expiry, upserts, clearing, and that it outlives the process."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from payops.store import migrate, open_engine
from payops.store.cache import NAMES, QUOTES, Cached, LookupCache, LookupCacheEntry, cache_key
from sqlalchemy import select

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def open_cache(url: str, clock: Clock | None = None) -> LookupCache:
    engine = open_engine(url)
    migrate(engine)
    return LookupCache(engine, clock or Clock())


def test_hit_miss_expiry_and_replacement(tmp_path: Path) -> None:
    clock = Clock()
    cache = open_cache(f"sqlite:///{tmp_path / 'c.sqlite3'}", clock)
    try:
        key = cache_key("msisdn", "mtn", "233241234567")
        cache.put_many(NAMES, {key: Cached("Ama Mensah", True)}, lambda _: timedelta(days=7))
        assert cache.get_many(NAMES, [key, cache_key("msisdn", "mtn", "233240000000")]) == {
            key: Cached("Ama Mensah", True)
        }
        assert cache.get_many(QUOTES, [key]) == {}  # kinds do not mix
        clock.now = T0 + timedelta(days=7, seconds=1)
        assert cache.get_many(NAMES, [key]) == {}  # expired
        cache.put_many(NAMES, {key: Cached("Kofi Owusu", True)}, lambda _: timedelta(days=7))
        assert cache.get_many(NAMES, [key]) == {key: Cached("Kofi Owusu", True)}  # replaced, not duplicated
        assert cache.clear() == 1 and cache.get_many(NAMES, [key]) == {}
    finally:
        cache.engine.dispose()


def test_keys_are_hashes_never_the_numbers(tmp_path: Path) -> None:
    cache = open_cache(f"sqlite:///{tmp_path / 'c.sqlite3'}")
    try:
        cache.put_many(
            NAMES, {cache_key("msisdn", "mtn", "233241234567"): Cached("Ama", True)}, lambda _: timedelta(1)
        )
        with cache.engine.connect() as conn:
            (key,) = conn.execute(select(LookupCacheEntry.key)).one()
        assert len(key) == 64 and "233241234567" not in key
        assert b"233241234567" not in (tmp_path / "c.sqlite3").read_bytes()
    finally:
        cache.engine.dispose()


def test_the_cache_survives_a_process_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    writer = (
        "from datetime import timedelta\n"
        "from store import migrate, open_engine\n"
        "from payops.store.cache import NAMES, Cached, LookupCache, cache_key\n"
        f"e = open_engine({url!r}); migrate(e)\n"
        "key = cache_key('msisdn', 'mtn', '233241234567')\n"
        "LookupCache(e).put_many(NAMES, {key: Cached('Ama Mensah', True)}, lambda _: timedelta(days=7))\n"
        "e.dispose()\n"
    )
    subprocess.run([sys.executable, "-c", writer], cwd=REPO, check=True, timeout=120)
    engine = open_engine(url)  # a new process's view: real clock, no migration needed to read
    cache = LookupCache(engine)
    try:
        assert cache.get_many(NAMES, [cache_key("msisdn", "mtn", "233241234567")]) == {
            cache_key("msisdn", "mtn", "233241234567"): Cached("Ama Mensah", True)
        }
    finally:
        cache.engine.dispose()
