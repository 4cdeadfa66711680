"""Contract tests, part 1: the client against the emulator (auth, payouts, batches, wallet, limits,
transactions, settlements and policy, fee quotes, payment methods). See ``payments_emulator.py``."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from payops.connectors.payments import PaymentsClient, PayoutRequest
from payops.connectors.payments import errors as e
from payops.sandbox import SandboxConfig

from tests.connectors.payments_emulator import MSISDN, Emulator
from tests.connectors.payments_emulator import make_emulator as _make


def payout(reference: str, amount: str = "10.00", value: str = MSISDN, **over: Any) -> PayoutRequest:
    return PayoutRequest(
        reference=reference,
        amount=amount,
        currency="GHS",
        provider="mtn",
        destination={"type": "msisdn", "value": value},
        **over,
    )


async def ghs_balance(client: PaymentsClient) -> Decimal:
    return (await client.wallet.get())[0].balances["GHS"]


# --------------------------------------------------------------------------------------------------
# Account and reference data
# --------------------------------------------------------------------------------------------------


async def test_wallet_limits_payment_methods(emu: Emulator) -> None:
    c = emu.client
    wallet = await c.wallet.get()
    assert wallet[0].name == "Demo Business Ltd" and wallet[0].balances["GHS"] == Decimal("10000000.00")
    limits = await c.limits.get()
    assert limits[0].currency == "GHS" and limits[0].per_transaction == Decimal("100000.00")
    assert limits[0].daily.limit == Decimal("50000000.00") and limits[0].daily.out.used == Decimal("0")
    methods = {m.provider: m for m in await c.payment_methods.list()}
    assert {"mtn", "telecel", "airteltigo", "calbank", "gcb", "ecobank", "card"} <= set(methods)
    assert methods["mtn"].type == "mobile_money" and "GHS" in methods["mtn"].currencies
    assert c.api_calls == {"GET /v1/wallet": 1, "GET /v1/limits": 1, "GET /v1/payment-methods": 1}
    assert c.token_requests == 1


async def test_fee_quotes_follow_the_contract_schedule(emu: Emulator) -> None:
    c = emu.client
    small = await c.fee_quotes.payout(amount=Decimal("10"), currency="GHS", provider="mtn")
    assert (small.fee, small.payer_amount, small.recipient_amount) == (
        Decimal("0.50"),
        Decimal("10.50"),
        Decimal("10.00"),
    )
    capped = await c.fee_quotes.payout(
        amount="5000.00", currency="GHS", provider="mtn", fee_bearer="non_initiator"
    )
    assert capped.fee == Decimal("20.00") and capped.recipient_amount == Decimal("4980.00")
    bank = await c.fee_quotes.payout(amount="100", currency="GHS", provider="gcb", destination_type="account")
    assert bank.fee == Decimal("1.00")
    collection = await c.fee_quotes.collection(amount=Decimal("10"), currency="GHS", provider="mtn")
    assert collection.fee == Decimal("0.15") and collection.fee_bearer == "non_initiator"


# --------------------------------------------------------------------------------------------------
# Payouts, idempotency, errors
# --------------------------------------------------------------------------------------------------


async def test_payout_lifecycle_on_the_emulator_clock(emu: Emulator) -> None:
    c = emu.client
    before = await ghs_balance(c)
    created = await c.payouts.create(payout("po-1", "10.00"), idempotency_key="k-po-1")
    assert created.status == "accepted" and created.fee == Decimal("0.50")
    assert await ghs_balance(c) == before - Decimal("10.50")
    failed = await c.payouts.create(payout("po-2", "5.00", value="233240000001"))
    emu.clock.advance(2.5)
    assert (await c.payouts.get("po-1")).status == "delivered"
    failed = await c.payouts.get("po-2")
    assert failed.status == "failed" and failed.failure_reason == "insufficient_funds_at_provider"
    assert c.api_calls["POST /v1/payouts"] == 2 and c.api_calls["GET /v1/payouts/{reference}"] == 2


async def test_same_key_same_body_is_answered_once(emu: Emulator) -> None:
    c = emu.client
    before = await ghs_balance(c)
    first = await c.payouts.create(payout("po-1"), idempotency_key="same-key")
    again = await c.payouts.create(payout("po-1"), idempotency_key="same-key")
    assert first.reference == again.reference and first.created_at == again.created_at
    assert await ghs_balance(c) == before - Decimal("10.50")  # charged once
    with pytest.raises(e.IdempotencyKeyReusedError) as info:
        await c.payouts.create(payout("po-1", "11.00"), idempotency_key="same-key")
    assert info.value.status == 409 and info.value.request_id


async def test_duplicate_reference_and_create_or_get(emu: Emulator) -> None:
    c = emu.client
    await c.payouts.create(payout("po-1"))
    with pytest.raises(e.DuplicateReferenceError):
        await c.payouts.create(payout("po-1", "12.00"))
    existing = await c.payouts.create_or_get(payout("po-1", "12.00"))
    assert existing.reference == "po-1" and existing.amount == Decimal("10.00")


async def test_refusals_map_to_typed_errors_without_retry(emu: Emulator) -> None:
    c = emu.client
    with pytest.raises(e.TransactionLimitExceededError) as info:
        await c.payouts.create(payout("po-big", "100000.01"))
    assert info.value.status == 403 and info.value.code == "transaction_limit_exceeded"
    with pytest.raises(e.ResourceNotFoundError):
        await c.payouts.get("never-sent")
    with pytest.raises(e.NotFoundError):
        await c.settlements.latest()
    assert emu.sleeps == []
    assert c.api_calls == {
        "POST /v1/payouts": 1,
        "GET /v1/payouts/{reference}": 1,
        "GET /v1/settlements/latest": 1,
    }


async def test_json_number_amount_is_invalid_input(emu: Emulator) -> None:
    body = {
        "reference": "po-num",
        "amount": 10,
        "currency": "GHS",
        "provider": "mtn",
        "destination": {"type": "msisdn", "value": MSISDN},
    }
    with pytest.raises(e.InvalidInputError) as info:
        await emu.client.request("POST", "/v1/payouts", body=body)
    assert info.value.status == 400


async def test_batch_items_accepted_or_refused_on_their_own(emu: Emulator) -> None:
    c = emu.client
    result = await c.payout_batches.create(
        reference="batch-1",
        items=[payout("b-1"), payout("b-2", "100000.01"), payout("b-3", value="233240000004")],
        idempotency_key="run-1-batch-0",
    )
    assert [(i.reference, i.status) for i in result.items] == [("b-1", 202), ("b-2", 403), ("b-3", 202)]
    assert result.items[1].error is not None and result.items[1].error.code == "transaction_limit_exceeded"
    assert result.items[0].payout is not None and result.items[0].payout.status == "accepted"
    emu.clock.advance(3)
    assert (await c.payouts.get("b-3")).status == "held"
    again = await c.payout_batches.create(
        reference="batch-1",
        items=[payout("b-1"), payout("b-2", "100000.01"), payout("b-3", value="233240000004")],
        idempotency_key="run-1-batch-0",
    )
    assert again.batch_id == result.batch_id


async def test_malformed_batch_is_refused_whole(emu: Emulator) -> None:
    item = payout("dup").to_wire()
    with pytest.raises(e.InvalidInputError):
        await emu.client.request("POST", "/v1/payout-batches", body={"reference": "b", "items": [item, item]})
    with pytest.raises(e.NotFoundError):
        await emu.client.payouts.get("dup")


async def test_transactions_pages_and_filters(emu: Emulator) -> None:
    c = emu.client
    for i in range(5):
        await c.payouts.create(payout(f"tx-{i}", "1.00"))
        emu.clock.advance(1)
    page = await c.transactions.list(kind="payout", limit=2)
    assert len(page.items) <= 2 and page.next_cursor
    refs = [t.reference async for t in c.transactions.iterate(kind="payout", limit=2)]
    assert sorted(refs) == [f"tx-{i}" for i in range(5)]
    assert refs == [f"tx-{i}" for i in reversed(range(5))]  # newest first
    assert all([t.kind == "payout" async for t in c.transactions.iterate(kind="payout")])
    since = (await c.payouts.get("tx-0")).created_at
    assert since is not None
    later = [t async for t in c.transactions.iterate(from_=since + timedelta(days=1))]
    assert later == []
    assert c.api_calls["GET /v1/transactions"] >= 4


# --------------------------------------------------------------------------------------------------
# Settlements and policy
# --------------------------------------------------------------------------------------------------


async def test_settlement_policy_put_get_delete(emu: Emulator) -> None:
    c = emu.client
    policy = await c.settlement_policy.put(
        schedule="manual",
        currency="GHS",
        minimum_balance="100.00",
        destinations=[
            {
                "type": "bank",
                "provider": "gcb",
                "account_number": "1400000000002",
                "account_name": "Demo",
                "share": "60",
            },
            {"type": "mobile_money", "provider": "mtn", "account_number": "233240000009", "share": "40"},
        ],
    )
    assert policy.minimum_balance == Decimal("100.00") and [d.share for d in policy.destinations] == [60, 40]
    assert policy.updated_at is not None
    assert (await c.settlement_policy.get()).destinations[0].provider == "gcb"
    assert await c.settlement_policy.delete() is None
    assert c.api_calls["DELETE /v1/settlement-policy"] == 1


async def test_settle_now_read_back_and_retry_of_a_failed_run(emu: Emulator) -> None:
    c = emu.client
    await c.settlement_policy.put(
        schedule="manual",
        minimum_balance="0.00",
        destinations=[
            {"type": "bank", "provider": "gcb", "account_number": "1400000000002", "share": "50"},
            {"type": "bank", "provider": "calbank", "account_number": "1400000009991", "share": "50"},
        ],
    )
    run = await c.settlements.settle_now(reference="settle-1", currency="GHS", idempotency_key="settle-1")
    assert run.status == "running" and run.reference == "settle-1"
    emu.clock.advance(3)
    done = await c.settlements.get(run.id)
    assert done.status == "completed" and done.outcome == "failed_partial"
    assert (await c.settlements.latest()).id == run.id
    assert [r.id async for r in c.settlements.iterate(limit=1)] == [run.id]
    # The failed part is paid again with the current policy: point it at a working account first.
    await c.settlement_policy.put(
        schedule="manual",
        destinations=[{"type": "bank", "provider": "gcb", "account_number": "1400000000002", "share": "100"}],
    )
    retry = await c.settlements.resettle(run.id, reference="settle-1-retry")
    assert retry.id != run.id and retry.status == "running"
    with pytest.raises(e.SettlementAlreadyRetriedError):
        await c.settlements.resettle(run.id, reference="settle-1-retry-2")
    emu.clock.advance(3)
    good = await c.settlements.get(retry.id)
    assert good.status == "completed" and good.outcome == "settled"
    with pytest.raises(e.ResettlementNotAllowedError):
        await c.settlements.resettle(retry.id, reference="settle-2-retry")
    assert {r.id for r in (await c.settlements.list(limit=5)).items} == {run.id, retry.id}


# --------------------------------------------------------------------------------------------------
# Auth, rate limits and faults end to end
# --------------------------------------------------------------------------------------------------


async def test_expired_token_is_renewed_after_one_401(emu: Emulator) -> None:
    c = emu.client
    await c.wallet.get()
    emu.clock.advance(301)  # the server's clock says the token expired; the client's cache does not know
    await c.wallet.get()
    assert c.token_requests == 2
    assert c.api_calls == {"GET /v1/wallet": 3}  # the refused request was replayed once


async def test_bad_credentials_are_refused() -> None:
    em = _make()
    async with em.connect(client_secret="wrong-secret") as client:
        with pytest.raises(e.AuthenticationError) as info:
            await client.wallet.get()
    assert "wrong-secret" not in str(info.value)
    assert client.api_calls == {}


async def test_rate_limit_waits_retry_after_and_succeeds() -> None:
    em = _make(SandboxConfig(rate_limit_per_s=1, rate_burst=2), max_retries=6)
    async with em.client as client:
        for _ in range(6):
            await client.limits.get()
    assert client.api_calls["GET /v1/limits"] > 6  # some were answered 429 and sent again
    assert em.sleeps and all(s >= 1.0 for s in em.sleeps)


async def test_faults_and_lost_answers_never_pay_twice() -> None:
    em = _make(SandboxConfig(fault_rate=0.4, fault_seed=7), max_retries=10)
    async with em.client as client:
        before = (await client.wallet.get())[0].balances["GHS"]
        for i in range(8):
            await client.payouts.create_or_get(payout(f"f-{i}", "10.00"), idempotency_key=f"run-f-{i}")
        after = (await client.wallet.get())[0].balances["GHS"]
        refs = {t.reference async for t in client.transactions.iterate(kind="payout")}
    assert before - after == Decimal("84.00")  # 8 x (10.00 + 0.50 fee), each charged exactly once
    assert refs == {f"f-{i}" for i in range(8)}
    assert client.api_calls["POST /v1/payouts"] > 8  # faults were retried
    stats = await em.stats()
    assert stats["businesses"]["demo"]["test"]["payouts"] == 8
    faults = {k: v for k, v in stats["requests"].items() if k.startswith("fault")}
    assert faults.get("fault 504 after commit", 0) >= 1, stats[
        "requests"
    ]  # some answers were lost after commit
