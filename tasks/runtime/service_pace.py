"""The pace a service last accepted from a credential, kept in the payops home, so the next process's adaptive
rate starts there instead of from nothing.

Each flow run is a process of its own (a command, a worker's, `payops serve`'s warm process), and a fresh
`AdaptiveRate` starts at 50 requests a second and doubles no faster than every 6 round trips: over 100 ms it
takes about two seconds to reach the 300 a second that 32 reads in flight carry, in every run
(docs/performance.md, *A rate that starts where the last run left it*). TCP keeps what it learned of a path
for the next connection the same way (RFC 9040's shared control block).

What is kept, per service and credential (a hash of the two; neither is written out), is what the last run
learned (`AdaptiveRate.learned`):
* after a 429, the rate its cuts arrived at: the service's pace, where the next run starts with no slow
  start (it would overshoot again);
* without one, the highest rate it was driven to (the service kept up): the next run starts there, still in
  slow start, and a pace learned since without a 429 only raises it.
A pace older than `KEEP_FOR` is forgotten: the service's limits or load may have changed. A remembered pace
that is now too fast costs one 429 and its cut, as a fresh slow start's overshoot does.

Hand-rolled: a small JSON file replaced atomically (the last writer wins); no library keeps a rate across
processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PACE_FILE = "service-pace.json"
KEEP_FOR_S = 24 * 3600.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pace:
    """A learned request rate: ``per_s``, and whether a 429 set it (``limited``: the service's own limit)."""

    per_s: float
    limited: bool


def pace_key(base_url: str, client_id: str) -> str:
    """The service and credential a pace belongs to, as the file names them (a hash: no URL or id kept)."""
    return hashlib.sha256(f"{base_url}\n{client_id}".encode()).hexdigest()[:32]


def _read(path: Path) -> dict[str, dict[str, float | bool]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # unreadable or torn by hand: start afresh, say so
        log.info("ignoring %s (%s): the rate starts from its default", path, type(exc).__name__)
        return {}
    return data if isinstance(data, dict) else {}


def _kept_at(entry: object) -> float:
    """When ``entry`` was kept (0 for one that is not an entry)."""
    try:
        return float(entry["at"]) if isinstance(entry, dict) else 0.0
    except (KeyError, TypeError, ValueError):
        return 0.0


def remembered(key: str, *, home: Path, now: float | None = None) -> Pace | None:
    """The pace kept for ``key`` in the payops ``home`` within `KEEP_FOR_S`, else None."""
    entry = _read(home / PACE_FILE).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        per_s, at, limited = float(entry["per_s"]), float(entry["at"]), bool(entry["limited"])
    except (KeyError, TypeError, ValueError):
        return None
    fresh = (now if now is not None else time.time()) - at <= KEEP_FOR_S
    return Pace(per_s, limited) if fresh and per_s > 0 else None


def remember(key: str, learned: Pace, *, home: Path, now: float | None = None) -> None:
    """Keep ``learned`` for ``key``: a limited pace replaces what was kept; an unlimited one only raises it
    (a run that needed less says nothing of the service)."""
    path = home / PACE_FILE
    now = now if now is not None else time.time()
    data = _read(path)
    before = remembered(key, home=home, now=now)
    if not learned.limited and before is not None and before.per_s >= learned.per_s:
        learned = before
    data[key] = {"per_s": round(learned.per_s, 1), "limited": learned.limited, "at": now}
    data = {k: v for k, v in data.items() if _kept_at(v) >= now - KEEP_FOR_S}
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".pace-", delete=False) as fh:
            try:
                json.dump(data, fh)
            except BaseException:
                os.unlink(fh.name)
                raise
        os.replace(fh.name, path)
    except OSError as exc:  # a full or read-only home: the next run ramps up from the default
        log.info("the service's pace was not kept (%s)", exc)
