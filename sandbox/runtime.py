"""``Sandbox``: the objects one emulator instance shares between middleware, dependencies and routes."""

from __future__ import annotations

import random
import secrets
import threading

from fastapi import Request

from .clock import Clock, SystemClock
from .config import SandboxConfig
from .ratelimit import RateLimiter
from .seed import load_seed_file, seed_defaults, seed_history
from .state import SandboxState

RESOURCE = "urn:payments-api"


class FaultPlan:
    """Seeded choice of injected failures: ``None`` or ``(status, after_commit)``."""

    STATUSES = (500, 502, 503, 504)

    def __init__(self, rate: float, seed: int | None) -> None:
        self.rate = rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def draw(self, method: str) -> tuple[int, bool] | None:
        """Decide the fate of one request; a 504 on POST is after the commit half of the time."""
        if self.rate <= 0:
            return None
        with self._lock:
            if self._rng.random() >= self.rate:
                return None
            status = self._rng.choice(self.STATUSES)
            after = status == 504 and method == "POST" and self._rng.random() < 0.5
            return status, after


class Sandbox:
    """Config, clock, state, signing key, rate limiter and fault plan of one app."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.clock: Clock = config.clock or SystemClock()
        self.state = SandboxState(self.clock)
        self.state.delivery_delay_s = config.delivery_delay_s
        self.state.settlement_delay_s = config.effective_settlement_delay_s
        self.jwt_secret = config.jwt_secret or secrets.token_urlsafe(32)
        self.limiter = (
            RateLimiter(config.rate_limit_per_s, config.effective_burst, self.clock)
            if config.rate_limit_per_s
            else None
        )
        self.faults = FaultPlan(config.fault_rate, config.fault_seed)
        with self.state.lock:
            seed_defaults(self.state)
            if config.seed_file is not None:
                load_seed_file(self.state, config.seed_file)
            if config.history_payouts:
                seed_history(self.state, config.history_payouts)


def get_sandbox(request: Request) -> Sandbox:
    """The ``Sandbox`` of the app serving ``request``."""
    return request.app.state.sandbox
