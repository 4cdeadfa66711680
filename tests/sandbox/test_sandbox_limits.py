"""Spec § Limits and GET /v1/limits: per transaction, daily, monthly, in/out, Africa/Accra calendar."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.sandbox.sandbox_support import payout

SMALL = {"GHS": {"perTransaction": "100.00", "daily": "150.00", "monthly": "250.00"}}


@pytest.fixture
async def small_limits(client) -> None:
    r = await client.put("/_sandbox/businesses/demo/test/limits", json={"limits": SMALL})
    assert r.status_code == 200


async def test_limits_read_with_used_and_remaining(api) -> None:
    await api.post("/v1/payouts", payout(amount="1000.00"))
    items = (await api.get("/v1/limits")).json()["items"]
    assert items == [
        {
            "currency": "GHS",
            "perTransaction": "100000.00",
            "daily": {
                "period": "daily",
                "limit": "50000000.00",
                "in": {"used": "0.00", "remaining": "50000000.00"},
                "out": {"used": "1000.00", "remaining": "49999000.00"},
            },
            "monthly": {
                "period": "monthly",
                "limit": "500000000.00",
                "in": {"used": "0.00", "remaining": "500000000.00"},
                "out": {"used": "1000.00", "remaining": "499999000.00"},
            },
        }
    ]


async def test_per_transaction_daily_monthly(api, clock, small_limits) -> None:
    r = await api.post("/v1/payouts", payout(amount="100.01"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "transaction_limit_exceeded"
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 202
    r = await api.post("/v1/payouts", payout(amount="50.01"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "daily_limit_exceeded"
    assert (await api.post("/v1/payouts", payout(amount="50.00"))).status_code == 202
    clock.set(datetime(2025, 3, 13, 0, 0, tzinfo=UTC))  # next Accra day
    await api.login()
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 202
    r = await api.post("/v1/payouts", payout(amount="0.01"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "monthly_limit_exceeded"
    clock.set(datetime(2025, 4, 1, 0, 0, tzinfo=UTC))  # next Accra month
    await api.login()
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 202


async def test_day_boundary_is_accra_midnight(api, clock, small_limits) -> None:
    clock.set(datetime(2025, 3, 12, 23, 59, 59, tzinfo=UTC))
    await api.login()
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 202
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 403
    clock.advance(1)
    assert (await api.post("/v1/payouts", payout(amount="100.00"))).status_code == 202


async def test_failed_payout_gives_usage_back(api, clock, small_limits) -> None:
    await api.post("/v1/payouts", payout(amount="100.00", value="233240000002"))
    clock.advance(2)
    out = (await api.get("/v1/limits")).json()["items"][0]["daily"]["out"]
    assert out == {"used": "0.00", "remaining": "150.00"}


async def test_no_limits_means_no_payment(api, client) -> None:
    await client.put("/_sandbox/businesses/demo/test/limits", json={"limits": {}})
    assert (await api.get("/v1/limits")).json() == {"items": []}
    r = await api.post("/v1/payouts", payout())
    assert r.status_code == 403 and r.json()["error"]["code"] == "limits_missing"


async def test_unusable_limits(api, client) -> None:
    await client.put("/_sandbox/businesses/demo/test/limits", json={"unusable": True})
    r = await api.post("/v1/payouts", payout())
    assert r.status_code == 403 and r.json()["error"]["code"] == "limits_unusable"
