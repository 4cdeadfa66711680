"""Issue 3: 50 concurrent clients posting batches of 100 against a real uvicorn server.

No payout lost or duplicated; wallet debits equal payouts plus fees; every replay is byte-identical.
Duration: ``SANDBOX_LOAD_SECONDS`` (default 20, the issue's figure; lower it for quick local runs).
"""

from __future__ import annotations

import os
import time

from payops.sandbox import SandboxConfig, SandboxServer

from tests.sandbox.sandbox_load import run_load

SECONDS = float(os.environ.get("SANDBOX_LOAD_SECONDS", "20"))


async def test_fifty_clients_posting_batches_keep_money_exact() -> None:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.2, token_ttl_s=3600)) as server:
        env = server.state.env("demo", "test")
        opening = env.wallet.available["GHS"]
        result = await run_load(server.base_url, clients=50, size=100, seconds=SECONDS)
        time.sleep(0.3)  # every payout passes its 0.2 s delivery delay
        server.state.advance_all()
        with server.state.lock:
            assert result.errors == []
            assert result.batches >= 50
            assert result.replays >= 50 and result.replay_mismatches == 0
            # nothing lost, nothing duplicated
            assert set(env.payouts) == set(result.accepted)
            assert len(env.payouts) == result.batches * 100 - result.refused
            assert sum(1 for t in env.transactions if t.kind == "payout") == len(env.payouts)
            # every payout delivered; debits equal payouts plus fees
            assert {p.status for p in env.payouts.values()} == {"delivered"}
            debited = env.wallet.debited["GHS"]
            assert debited == sum(result.accepted.values())
            assert debited == sum(p.amount + p.fee for p in env.payouts.values())
            assert env.wallet.reserved["GHS"] == 0
            assert env.wallet.available["GHS"] == opening - debited
            assert env.wallet.balanced()
