"""Admin hooks for what the spec leaves to the platform: a reconciliation result, a late refund with
lineage, a fee re-recorded, a movement made outside the API. The ledger stays balanced through each."""

from __future__ import annotations

from decimal import Decimal

from tests.sandbox.sandbox_support import payout

ADMIN = "/_sandbox/businesses/demo/test"


async def _delivered(api, clock, reference: str, amount: str = "100.00") -> dict:
    r = await api.post("/v1/payouts", payout(reference, amount=amount))
    assert r.status_code == 202, r.text
    clock.advance(5)
    body = (await api.get(f"/v1/payouts/{reference}")).json()
    assert body["status"] == "delivered"
    return body


def _total(demo) -> Decimal:
    return demo.wallet.available["GHS"] + demo.wallet.reserved["GHS"]


async def test_reconciliation_result_set_by_the_platform(api, client, clock) -> None:
    await _delivered(api, clock, "pf-rec-1")
    r = await client.post(f"{ADMIN}/payouts/pf-rec-1/reconciliation", json={"status": "mismatched"})
    assert r.status_code == 200 and r.json()["reconciliation"]["status"] == "mismatched"
    listed = (await api.get("/v1/transactions", reconciliationStatus="mismatched")).json()["items"]
    assert [t["reference"] for t in listed] == ["pf-rec-1"]
    r = await client.post(f"{ADMIN}/payouts/pf-rec-1/reconciliation", json={"status": "unchecked"})
    assert r.json()["reconciliation"] == {"status": "unchecked"}
    unknown = await client.post(f"{ADMIN}/payouts/nope/reconciliation", json={"status": "matched"})
    assert unknown.status_code == 404


async def test_late_refund_records_a_reversal_with_lineage(api, client, clock, demo) -> None:
    sent = await _delivered(api, clock, "pf-ref-1")
    before = _total(demo)
    clock.advance(3600)
    await api.login()  # tokens last 5 minutes
    r = await client.post(f"{ADMIN}/payouts/pf-ref-1/refund")
    assert r.status_code == 200, r.text
    reversal = r.json()
    assert reversal["reference"] == "rvr-pf-ref-1" and reversal["direction"] == "in"
    assert reversal["kind"] == "payout" and reversal["parent"] == {"type": "payout", "reference": "pf-ref-1"}
    assert reversal["amount"] == sent["payerAmount"]
    refunded = (await api.get("/v1/payouts/pf-ref-1")).json()
    assert refunded["status"] == "refunded"
    assert refunded["compensation"] == {"type": "payout", "reference": "rvr-pf-ref-1"}
    assert _total(demo) - before == Decimal(sent["payerAmount"]) and demo.wallet.balanced()
    assert demo.events[-1].type == "payout.status_changed" and demo.events[-1].data["status"] == "refunded"
    again = await client.post(f"{ADMIN}/payouts/pf-ref-1/refund")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_delivered"


async def test_fee_or_amount_re_recorded_moves_the_wallet_by_the_difference(api, client, clock, demo) -> None:
    sent = await _delivered(api, clock, "pf-fee-1")
    before = _total(demo)
    r = await client.post(f"{ADMIN}/payouts/pf-fee-1/adjust", json={"fee": "3.00"})
    assert r.status_code == 200 and r.json()["fee"] == "3.00" and r.json()["payerAmount"] == "103.00"
    assert before - _total(demo) == Decimal("3.00") - Decimal(sent["fee"]) and demo.wallet.balanced()
    r = await client.post(f"{ADMIN}/payouts/pf-fee-1/adjust", json={"amount": "90.00"})
    assert r.json()["amount"] == "90.00" and r.json()["payerAmount"] == "93.00"
    assert before - _total(demo) == Decimal("93.00") - Decimal(sent["payerAmount"]) and demo.wallet.balanced()


async def test_outside_movements_have_transaction_lines(api, client, demo) -> None:
    before = _total(demo)
    out = {"kind": "payout", "reference": "dash-1", "amount": "50.00"}
    r = await client.post(f"{ADMIN}/movements", json=out)
    assert r.status_code == 200 and r.json()["status"] == "delivered" and r.json()["payerAmount"] == "50.50"
    r = await client.post(
        f"{ADMIN}/movements", json={"kind": "collection", "reference": "dash-2", "amount": "20.00"}
    )
    assert r.status_code == 200 and r.json()["direction"] == "in"
    assert _total(demo) - before == Decimal("20.00") - Decimal("50.50") and demo.wallet.balanced()
    refs = [t["reference"] for t in (await api.get("/v1/transactions")).json()["items"]]
    assert refs[:2] == ["dash-2", "dash-1"]
    dup = await client.post(f"{ADMIN}/movements", json={**out, "amount": "1.00"})
    assert dup.status_code == 409
