"""``payops sandbox --history N``: a service with a past. N delivered payouts of the day before are listed
and read like any other, and today's traffic still finds its own time window at once."""

from __future__ import annotations

from datetime import timedelta

from payops.sandbox import SandboxConfig

from tests.connectors.payments_emulator import make_emulator
from tests.connectors.test_payments_contract import payout


async def test_history_is_the_day_before_and_listed_like_any_payout() -> None:
    emu = make_emulator(SandboxConfig(history_payouts=250))
    async with emu.client as c:
        now = emu.clock.now()
        old = [tx async for tx in c.transactions.iterate(to=now - timedelta(hours=12), limit=100)]
        assert len(old) == 250 and {tx.status for tx in old} == {"delivered"}
        assert all(now - timedelta(hours=37) < tx.created_at < now - timedelta(hours=12) for tx in old)
        assert len({tx.reference for tx in old}) == 250 and all(tx.amount and tx.fee for tx in old)
        assert (await c.payouts.get("hist-7")).status == "delivered"
        await c.payouts.create(payout("today-1", "10.00"))
        today = [tx.reference async for tx in c.transactions.iterate(from_=now - timedelta(minutes=1))]
        assert today == ["today-1"]
