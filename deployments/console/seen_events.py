"""A small SQLite store of webhook event ids already turned into Prefect events (survives restarts)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

RETENTION_S = 90 * 24 * 3600  # the service keeps events (and may replay them) for 90 days


class SeenEvents:
    """``claim(id)`` is True for the first delivery of an event id, False for a duplicate.

    A claim is taken before the Prefect event is emitted; ``release(id)`` gives it back when emitting
    failed, so the service's retry is processed again.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=10, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, received_at REAL NOT NULL)")
        self._db.execute("DELETE FROM seen WHERE received_at < ?", (time.time() - RETENTION_S,))

    def claim(self, event_id: str) -> bool:
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO seen (id, received_at) VALUES (?, ?)", (event_id, time.time())
            )
            return cur.rowcount == 1

    def release(self, event_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM seen WHERE id = ?", (event_id,))

    def __contains__(self, event_id: object) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM seen WHERE id = ?", (event_id,)).fetchone()
        return row is not None

    def close(self) -> None:
        with self._lock:
            self._db.close()
