"""Per-credential token buckets on the sandbox clock (``429 rate_limited`` with ``Retry-After``)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from .clock import Clock


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """``rate`` tokens per second, at most ``burst`` saved up, one bucket per key (client id)."""

    def __init__(self, rate: float, burst: int, clock: Clock) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str) -> int | None:
        """Take one token; ``None`` when allowed, else the whole seconds to wait (at least 1)."""
        now = self.clock.now().timestamp()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return max(1, math.ceil((1.0 - bucket.tokens) / self.rate))
