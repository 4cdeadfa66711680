"""A pre-flight worker process for the shared-cache test: 50 payees through the cache at PAYOPS_DATABASE_URL.

Prints `{"lookups": {...}, "quotes": {...}, "calls": {...}}` as JSON. Run as
`python -m tests.store.cache_worker SEED` (SEED varies the amounts, not the payees).
"""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal

from payops.sandbox.engine.party_lookups import holder_name
from payops.store import PayopsSettings, migrate, upgrade_database
from payops.store.cache import LookupCache
from payops.tasks.payouts.preflight import run_preflight
from payops.tasks.rows.payout_row import PayoutRow

from tests.connectors.payments_emulator import make_emulator


async def main(seed: int) -> None:
    numbers = [f"23324{i:07d}" for i in range(600, 650)]
    rows = [
        PayoutRow(
            row=i + 2,
            amount=Decimal(f"{100 + 7 * i + seed}.{(13 * i + seed) % 100:02d}"),
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination=n,
            payee_name=holder_name(n),
        )
        for i, n in enumerate(numbers)
    ]
    engine = upgrade_database(PayopsSettings.from_env())
    migrate(engine)
    em = make_emulator()
    try:
        async with em.client:
            pf = await run_preflight(em.client, rows, cache=LookupCache(engine))
            calls = dict(em.client.api_calls)
    finally:
        engine.dispose()
    print(json.dumps({"lookups": pf.lookups, "quotes": pf.quotes, "calls": calls}))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
