"""The emulator's state: businesses, credentials and one ``EnvState`` per business and environment.

All mutation happens under ``SandboxState.lock`` in short synchronous sections, so concurrent requests
(one uvicorn event loop, or test threads reading ``server.state``) never see half-done money moves.
Status changes are lazy: ``EnvState.advance(now)`` runs every scheduled step that is due by the clock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .clock import Clock
from .ledger import Wallet
from .limits import LimitBook
from .records import Business, Credential, Event, Movement, SettlementRun, new_id
from .resources import EnvResources

#: Providers known to the platform (contract.md); ``type`` decides the destination type they pay to.
PROVIDERS: dict[str, dict[str, Any]] = {
    "mtn": {"name": "MTN Mobile Money", "type": "mobile_money", "destination": "msisdn"},
    "telecel": {"name": "Telecel Cash", "type": "mobile_money", "destination": "msisdn"},
    "airteltigo": {"name": "AirtelTigo Money", "type": "mobile_money", "destination": "msisdn"},
    "calbank": {"name": "CalBank", "type": "bank", "destination": "account"},
    "gcb": {"name": "GCB Bank", "type": "bank", "destination": "account"},
    "ecobank": {"name": "Ecobank", "type": "bank", "destination": "account"},
    "card": {"name": "Card", "type": "card", "destination": "card"},
}
PROVIDER_CURRENCIES = ("GHS",)

EventHook = Callable[["EnvState", Event], None]


@dataclass
class StoredAnswer:
    """A response kept for replay: status and the exact body bytes."""

    status: int
    body: bytes


@dataclass
class IdempotencyEntry:
    """What one Idempotency-Key was used for, and its answer once known (None while in flight)."""

    fingerprint: str
    answer: StoredAnswer | None = None


@dataclass
class ReferenceEntry:
    """The first request made with a reference: its canonical body and its answer."""

    fingerprint: object  # any hashable, comparable identity of the request
    status: int
    payload: dict[str, Any]


@dataclass
class EnvState:
    """Everything one business owns in one environment. Test and live never share an ``EnvState``."""

    business: Business
    environment: str
    wallet: Wallet
    limits: LimitBook
    sandbox: SandboxState
    providers: set[str] = field(default_factory=lambda: set(PROVIDERS))
    payouts: dict[str, Movement] = field(default_factory=dict)
    transactions: list[Any] = field(default_factory=list)  # objects with to_transaction(), kind, status, ...
    transactions_in_time_order: bool = True
    """Whether ``transactions`` is sorted by ``created_at`` (a clock set back breaks it): lets the list
    endpoint jump to a time window instead of scanning every record."""
    settlement_policy: dict[str, Any] | None = None  # wire form of the policy (with updatedAt)
    settlement_runs: list[SettlementRun] = field(default_factory=list)
    settlement_nettable: bool = True
    policy_generation: int = 0
    events: list[Event] = field(default_factory=list)
    idempotency: dict[str, IdempotencyEntry] = field(default_factory=dict)
    references: dict[tuple[str, str], ReferenceEntry] = field(default_factory=dict)
    resources: EnvResources = field(default_factory=EnvResources)  # collections, checkouts, webhooks, ...
    _due: list[tuple[datetime, int, Callable[[datetime], None]]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        """``(business_id, environment)``."""
        return (self.business.id, self.environment)

    def schedule(self, at: datetime, action: Callable[[datetime], None]) -> None:
        """Run ``action(at)`` once the clock reaches ``at`` (on the next ``advance``)."""
        heapq.heappush(self._due, (at, next(self.sandbox.seq), action))

    def advance(self, now: datetime) -> None:
        """Run every scheduled step due by ``now`` in time order, then the sandbox's periodic advancers."""
        while self._due and self._due[0][0] <= now:
            at, _, action = heapq.heappop(self._due)
            action(at)
        for advancer in self.sandbox.advancers:
            advancer(self, now)

    def add_transaction(self, record: Any) -> None:
        """Append a movement to the transaction list (newest last; listed newest first)."""
        record.seq = len(self.transactions) + 1
        if self.transactions and record.created_at < self.transactions[-1].created_at:
            self.transactions_in_time_order = False
        self.transactions.append(record)

    def record_event(self, type_: str, at: datetime, data: dict[str, Any]) -> Event:
        """Keep an event for webhooks and ``GET /v1/events``; the sandbox's event hooks are called."""
        event = Event(
            id=new_id("evt_"),
            seq=len(self.events) + 1,
            type=type_,
            created_at=at,
            data=data,
            business_id=self.business.id,
            environment=self.environment,
        )
        self.events.append(event)
        for hook in self.sandbox.event_hooks:
            hook(self, event)
        return event


class SandboxState:
    """All businesses, credentials and per-environment state of one emulator instance."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.seq = itertools.count(1)
        self.businesses: dict[str, Business] = {}
        self.credentials: dict[str, Credential] = {}
        self.envs: dict[tuple[str, str], EnvState] = {}
        self.event_hooks: list[EventHook] = []
        self.advancers: list[Callable[[EnvState, datetime], None]] = []
        self.requests: Counter[str] = Counter()
        self.delivery_delay_s = 2.0
        self.settlement_delay_s = 2.0

    def env(self, business_id: str, environment: str) -> EnvState:
        """The state of a business in an environment (KeyError when unknown)."""
        return self.envs[(business_id, environment)]

    def envs_of(self, business_id: str) -> list[EnvState]:
        """Both environments of a business."""
        return [e for e in self.envs.values() if e.business.id == business_id]

    def business_by_handle(self, handle: str) -> Business | None:
        """Look a business up by its handle."""
        return next((b for b in self.businesses.values() if b.handle == handle), None)

    def advance(self, env: EnvState) -> None:
        """Bring ``env`` up to the clock."""
        with self.lock:
            env.advance(self.clock.now())

    def advance_all(self) -> None:
        """Bring every environment up to the clock."""
        with self.lock:
            now = self.clock.now()
            for env in self.envs.values():
                env.advance(now)
