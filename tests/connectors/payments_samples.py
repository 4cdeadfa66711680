"""Sample wire bodies of the Payments Service (as the spec and contract.md describe them)."""

PAYOUT = {
    "reference": "po-1",
    "amount": "12.50",
    "currency": "GHS",
    "status": "accepted",
    "provider": "mtn",
    "fee": "0.50",
    "feeBearer": "initiator",
    "payerAmount": "13.00",
    "recipientAmount": "12.50",
    "createdAt": "2026-01-01T10:00:00Z",
    "channel": "api",
    "reconciliation": {"status": "unchecked"},
}
COLLECTION = {**PAYOUT, "reference": "co-1", "settlementStatus": "not_eligible", "status": "dispatched"}
CHECKOUT = {
    "id": "7a1d2c3e-0000-4000-8000-000000000001",
    "reference": "ck-1",
    "amount": "20.00",
    "currency": "GHS",
    "environment": "test",
    "status": "open",
    "url": "https://pay.example/c/abc",
    "expiresAt": None,
    "paidAt": None,
    "collectionReference": None,
    "createdAt": "2026-01-01T10:00:00Z",
    "amountType": "fixed",
    "minAmount": None,
    "maxAmount": None,
    "suggestedAmounts": [],
    "usage": "single",
    "paymentsCount": 0,
    "totalCollected": "0.00",
}
UTILITY_PRODUCT = {
    "id": "mtn-airtime",
    "category": "airtime",
    "network": "mtn",
    "name": "MTN airtime",
    "kind": "flexi",
    "min": "1.00",
    "max": "500.00",
    "currency": "GHS",
    "delivery": "verified",
}
UTILITY_PURCHASE = {
    "reference": "up-1",
    "status": "accepted",
    "product": {"id": "mtn-airtime", "category": "airtime", "network": "mtn", "name": "MTN airtime"},
    "beneficiary": {"msisdn": "233240000000"},
    "amount": "5.00",
    "currency": "GHS",
    "funding": {"type": "wallet"},
    "createdAt": "2026-01-01T10:00:00Z",
}
UTILITY_FEE_QUOTE = {
    "productId": "mtn-airtime",
    "amount": "5.00",
    "currency": "GHS",
    "fee": "0.10",
    "gross": "5.10",
}
TRANSFER = {
    "reference": "tr-1",
    "amount": "10.00",
    "currency": "GHS",
    "status": "completed",
    "recipientHandle": "acme",
}
SETTLEMENT_RUN = {
    "id": "5b6c7d8e-0000-4000-8000-000000000002",
    "reference": "st-1",
    "status": "running",
    "itemCount": 1,
    "total": "100.00",
    "currency": "GHS",
    "startedAt": "2026-01-01T10:00:00Z",
}
PERIOD = {
    "limit": "50.00",
    "in": {"used": "0.00", "remaining": "50.00"},
    "out": {"used": "1.00", "remaining": "49.00"},
}
LIMITS = {
    "items": [
        {
            "currency": "GHS",
            "perTransaction": "10.00",
            "daily": {"period": "daily", **PERIOD},
            "monthly": {"period": "monthly", **PERIOD},
        }
    ]
}
WALLET = {"items": [{"name": "Demo", "balances": {"GHS": "100.00"}, "reserved": {"GHS": "0.00"}}]}
TRANSACTION = {**PAYOUT, "id": "tx-1", "kind": "payout", "direction": "out"}
FEE_QUOTE = {
    "amount": "10.00",
    "currency": "GHS",
    "provider": "mtn",
    "fee": "0.50",
    "feeBearer": "initiator",
    "payerAmount": "10.50",
    "recipientAmount": "10.00",
}
POLICY = {
    "schedule": "daily",
    "currency": "GHS",
    "minimumBalance": "0.00",
    "destinations": [
        {"type": "bank", "provider": "gcb", "accountNumber": "1234", "accountName": "Demo", "share": "100"}
    ],
    "updatedAt": "2026-01-01T10:00:00Z",
}
EVENT = {"id": "ev-1", "type": "payout.status_changed", "createdAt": "2026-01-01T10:00:00Z", "data": PAYOUT}
BATCH_RESULT = {
    "batchId": "b-1",
    "reference": "batch-1",
    "items": [
        {"reference": "po-1", "status": 202, "payout": PAYOUT},
        {"reference": "po-2", "status": 403, "error": {"code": "daily_limit_exceeded", "message": "limit"}},
    ],
}
