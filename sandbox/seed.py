"""Seed data: the demo business, a second business, and loading more from a JSON file (``--seed``)."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from .engine.settlements import install_policy
from .ledger import Wallet
from .limits import CurrencyLimit, LimitBook
from .money import payout_fee, split_by_fee_bearer
from .records import ALL_PERMISSIONS, ENVIRONMENTS, Business, Credential, Movement
from .state import PROVIDERS, EnvState, SandboxState

READ_PERMISSIONS = frozenset(p for p in ALL_PERMISSIONS if p.endswith(".read"))

DEFAULT_LIMITS = {"GHS": {"perTransaction": "100000.00", "daily": "50000000.00", "monthly": "500000000.00"}}

DEMO_POLICY: dict[str, Any] = {
    "schedule": "manual",
    "currency": "GHS",
    "minimumBalance": "1000000.00",
    "destinations": [
        {
            "type": "bank",
            "provider": "calbank",
            "accountNumber": "1400000000001",
            "accountName": "Demo Business Ltd",
            "share": "70",
        },
        {
            "type": "mobile_money",
            "provider": "mtn",
            "accountNumber": "233240000001",
            "accountName": "Demo Business Ltd",
            "share": "30",
        },
    ],
}

DEFAULT_SEED: dict[str, Any] = {
    "businesses": [
        {
            "id": "demo",
            "handle": "demo-business",
            "name": "Demo Business Ltd",
            "credentials": [
                {"clientId": "demo-test-client", "clientSecret": "demo-test-secret", "environment": "test"},
                {"clientId": "demo-live-client", "clientSecret": "demo-live-secret", "environment": "live"},
                {
                    "clientId": "demo-test-readonly",
                    "clientSecret": "demo-test-readonly-secret",
                    "environment": "test",
                    "permissions": sorted(READ_PERMISSIONS),
                },
            ],
            "environments": {
                "test": {
                    "wallet": {"GHS": "10000000.00"},
                    "limits": DEFAULT_LIMITS,
                    "settlementPolicy": DEMO_POLICY,
                },
                "live": {
                    "wallet": {"GHS": "100000.00"},
                    "limits": DEFAULT_LIMITS,
                    "settlementPolicy": DEMO_POLICY,
                },
            },
        },
        {
            "id": "acme",
            "handle": "acme-traders",
            "name": "Acme Traders",
            "credentials": [
                {"clientId": "acme-test-client", "clientSecret": "acme-test-secret", "environment": "test"},
                {"clientId": "acme-live-client", "clientSecret": "acme-live-secret", "environment": "live"},
            ],
            "environments": {
                "test": {"wallet": {"GHS": "1000000.00"}, "limits": DEFAULT_LIMITS},
                "live": {"wallet": {"GHS": "0.00"}, "limits": DEFAULT_LIMITS},
            },
        },
    ]
}


def parse_limits(raw: dict[str, Any]) -> dict[str, CurrencyLimit]:
    """``{"GHS": {"perTransaction": "...", "daily": "...", "monthly": "..."}}`` → limits."""
    return {
        currency: CurrencyLimit(
            per_transaction=Decimal(str(v["perTransaction"])),
            daily=Decimal(str(v["daily"])),
            monthly=Decimal(str(v["monthly"])),
        )
        for currency, v in raw.items()
    }


def load_business(state: SandboxState, spec: dict[str, Any]) -> Business:
    """Add (or replace) one business with its credentials and both environments."""
    now = state.clock.now()
    business = Business(
        id=spec["id"],
        handle=spec.get("handle", spec["id"]),
        name=spec.get("name", spec["id"]),
        status=spec.get("status", "active"),
    )
    state.businesses[business.id] = business
    for cid in [c for c, cred in state.credentials.items() if cred.business_id == business.id]:
        del state.credentials[cid]
    for cred in spec.get("credentials", []):
        perms = cred.get("permissions", "all")
        state.credentials[cred["clientId"]] = Credential(
            client_id=cred["clientId"],
            client_secret=cred["clientSecret"],
            business_id=business.id,
            environment=cred.get("environment", "test"),
            permissions=ALL_PERMISSIONS if perms == "all" else frozenset(perms),
        )
    envs = spec.get("environments", {})
    for environment in ENVIRONMENTS:
        raw = envs.get(environment, {})
        wallet = Wallet(name=business.name, created_at=now)
        for currency, amount in raw.get("wallet", {"GHS": "0.00"}).items():
            wallet.credit(currency, Decimal(str(amount)), now, "opening-balance")
        env = EnvState(
            business=business,
            environment=environment,
            wallet=wallet,
            limits=LimitBook(limits=parse_limits(raw.get("limits", {}))),
            sandbox=state,
            providers=set(raw.get("providers", PROVIDERS)),
        )
        state.envs[(business.id, environment)] = env
        policy = raw.get("settlementPolicy")
        if policy:
            install_policy(env, policy, now)
    return business


def load_seed(state: SandboxState, data: dict[str, Any]) -> None:
    """Load every business of a seed document."""
    for spec in data.get("businesses", []):
        load_business(state, spec)


def load_seed_file(state: SandboxState, path: Path) -> None:
    """Load businesses from a JSON file, in addition to (or replacing, by id) the defaults."""
    load_seed(state, json.loads(Path(path).read_text(encoding="utf-8")))


def seed_defaults(state: SandboxState) -> None:
    """The demo and acme businesses."""
    load_seed(state, DEFAULT_SEED)


HISTORY_DAY = timedelta(days=1)


def seed_history(
    state: SandboxState, count: int, business_id: str = "demo", environment: str = "test"
) -> None:
    """``count`` delivered payouts of the business's day before: created one after another over the 24 hours
    that ended 12 hours ago, distinct numbers, amounts with cents; listed and read by reference as any
    other. A service with a past, for benchmarks: the wallet and today's limits are as seeded (the opening
    balance is what those payouts left)."""
    env = state.env(business_id, environment)
    start = state.clock.now() - HISTORY_DAY - timedelta(hours=12)
    step = HISTORY_DAY / max(count, 1)
    for i in range(count):
        amount = Decimal(f"{10 + i % 23}.{(i * 7) % 100:02d}")
        fee = payout_fee(amount)
        payer_amount, recipient_amount = split_by_fee_bearer(amount, fee, "initiator")
        created = start + step * i
        payout = Movement(
            kind="payout",
            direction="out",
            reference=f"hist-{i}",
            amount=amount,
            currency="GHS",
            status="delivered",
            created_at=created,
            completed_at=created + timedelta(seconds=2),
            provider="mtn",
            fee=fee,
            fee_bearer="initiator",
            payer_amount=payer_amount,
            recipient_amount=recipient_amount,
            destination={"type": "msisdn", "value": f"23320{i:07d}"},
        )
        env.payouts[payout.reference] = payout
        env.add_transaction(payout)
