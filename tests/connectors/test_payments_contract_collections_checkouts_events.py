"""Contract tests of collections, checkouts, utilities, transfers, recipients, party lookups and events.

Expectations come from the spec and docs/contract.md only (no emulator internals).
"""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest
from payops.connectors.payments import CollectionRequest
from payops.connectors.payments import errors as e
from payops.connectors.payments import models as m

from tests.connectors.payments_emulator import MSISDN, Emulator


async def test_collection_create_and_get(emu: Emulator) -> None:
    c = emu.client
    created = await c.collections.create(
        CollectionRequest(
            reference="co-1",
            amount="25.00",
            currency="GHS",
            provider="mtn",
            payer={"type": "msisdn", "value": MSISDN},
            note="invoice 7",
        ),
        idempotency_key="co-1",
    )
    assert created.reference == "co-1" and created.amount == Decimal("25.00")
    assert created.status in m.COLLECTION_STATUSES
    read = await c.collections.get("co-1")
    assert read.reference == "co-1" and read.note == "invoice 7"
    again = await c.collections.create_or_get(
        reference="co-1",
        amount="25.00",
        currency="GHS",
        provider="mtn",
        payer={"type": "msisdn", "value": MSISDN},
        note="invoice 7",
        idempotency_key="co-1",
    )
    assert again.reference == "co-1"
    with pytest.raises(e.NotFoundError):
        await c.collections.get("no-such-collection")
    assert c.api_calls["POST /v1/collections"] == 2 and c.api_calls["GET /v1/collections/{reference}"] == 2


async def test_checkout_create_list_get_cancel(emu: Emulator) -> None:
    c = emu.client
    fixed = await c.checkouts.create(reference="ck-1", currency="GHS", amount="20.00", description="Tee")
    assert fixed.status == "open" and fixed.amount == Decimal("20.00") and fixed.amount_type == "fixed"
    assert fixed.environment == "test" and fixed.url and fixed.payments_count == 0
    open_amount = await c.checkouts.create(
        reference="ck-2",
        currency="GHS",
        amount_type="open",
        min_amount="1.00",
        max_amount="100.00",
        usage="reusable",
    )
    assert open_amount.amount is None and open_amount.usage == "reusable"
    page = await c.checkouts.list(limit=1)
    assert len(page.items) == 1 and page.next_cursor  # two checkouts, page size one
    ids = [ck.id async for ck in c.checkouts.iterate(limit=1)]
    assert ids == [open_amount.id, fixed.id]  # newest first
    detail = await c.checkouts.get(fixed.id)
    assert detail.attempts is not None  # attempts come with the single-checkout read
    cancelled = await c.checkouts.cancel(fixed.id)
    assert cancelled.status == "cancelled"
    assert [ck.id async for ck in c.checkouts.iterate(status="open")] == [open_amount.id]
    with pytest.raises(e.NotFoundError):
        await c.checkouts.get("00000000-0000-4000-8000-000000000000")


async def test_utilities_products_quote_purchase(emu: Emulator) -> None:
    c = emu.client
    products = await c.utilities.products()
    assert products and all(p.currency == "GHS" for p in products)
    flexi = next(p for p in products if p.kind == "flexi")
    assert flexi.min is not None and flexi.max is not None
    quote = await c.utilities.fee_quote(product_id=flexi.id, amount=flexi.min)
    assert quote.gross == quote.amount + quote.fee and quote.product_id == flexi.id
    purchase = await c.utilities.purchase(
        reference="up-1",
        product_id=flexi.id,
        amount=flexi.min,
        currency="GHS",
        beneficiary={"msisdn": MSISDN},
        funding={"type": "wallet"},
    )
    assert purchase.reference == "up-1" and purchase.status
    assert (await c.utilities.get_purchase("up-1")).reference == "up-1"
    with pytest.raises(e.ProductNotFoundError):
        await c.utilities.fee_quote(product_id="no-such-product", amount="5.00")
    with pytest.raises(e.AmountOutOfRangeError):
        await c.utilities.fee_quote(product_id=flexi.id, amount=flexi.max + 1)
    with pytest.raises(e.CurrencyNotSupportedError):
        await c.utilities.purchase(
            reference="up-usd",
            product_id=flexi.id,
            amount=flexi.min,
            currency="USD",
            beneficiary={"msisdn": MSISDN},
            funding={"type": "wallet"},
        )


async def test_transfers_and_recipients(emu: Emulator) -> None:
    c = emu.client
    recipient = await c.recipients.get("acme-traders")
    assert recipient.handle == "acme-traders" and recipient.name
    before = (await c.wallet.get())[0].balances["GHS"]
    transfer = await c.transfers.create(
        reference="tr-1", handle="acme-traders", amount="15.00", currency="GHS"
    )
    assert transfer.status == "completed" and transfer.amount == Decimal("15.00")
    assert (await c.wallet.get())[0].balances["GHS"] == before - Decimal("15.00")  # no fee
    assert (await c.transfers.get("tr-1")).reference == "tr-1"
    with pytest.raises(e.ReferenceReusedError):
        await c.transfers.create(reference="tr-1", handle="acme-traders", amount="16.00", currency="GHS")
    with pytest.raises(e.NotFoundError):
        await c.recipients.get("no-such-handle")


async def test_party_lookups_and_their_errors(emu: Emulator) -> None:
    c = emu.client
    found = await c.party_lookups.lookup(provider="mtn", msisdn=MSISDN)
    assert found.msisdn == MSISDN and found.name
    with pytest.raises(e.ResourceNotFoundError):
        await c.party_lookups.lookup(provider="mtn", msisdn="233240000404")
    with pytest.raises(e.ProviderError):
        await c.party_lookups.lookup(provider="mtn", msisdn="233240000502")
    with pytest.raises(e.ProviderTimeoutError):
        await c.party_lookups.lookup(provider="mtn", msisdn="233240000504")
    # 5xx are retried per the spec's rule 1, with the budget of the settings.
    assert c.api_calls["GET /v1/party-lookups"] == 2 + 2 * (c.settings.max_retries + 1)


async def test_events_feed_catch_up(emu: Emulator) -> None:
    c = emu.client
    # Events exist only once the business has a webhook endpoint (spec): register one (console stand-in).
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=emu.app), base_url="http://sandbox"
    ) as raw:
        answer = await raw.post(
            "/_sandbox/businesses/demo/test/webhook-endpoints",
            json={"url": "https://hooks.example.invalid/payops"},
        )
        assert answer.status_code == 201
    await c.payouts.create(
        reference="ev-po-1",
        amount="1.00",
        currency="GHS",
        provider="mtn",
        destination={"type": "msisdn", "value": MSISDN},
    )
    emu.clock.advance(10)
    events = [ev async for ev in c.events.iterate(limit=1)]  # one per page: follows nextAfter
    assert [ev.type for ev in events] == ["payout.accepted", "payout.status_changed", "payout.status_changed"]
    records = [ev.record() for ev in events]
    assert all(isinstance(r, m.Payout) and r.reference == "ev-po-1" for r in records)
    assert [r.status for r in records if isinstance(r, m.Payout)][-1] == "delivered"
    assert c.api_calls["GET /v1/events"] >= 3
    assert [ev async for ev in c.events.iterate(after=events[-1].id)] == []  # resume from the last id
    page = await c.events.list(limit=1)
    assert len(page.items) == 1 and page.next_after
