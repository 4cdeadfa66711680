"""Spec § Hosted checkout: create, list (newest first, status, limit, cursor ''), get with masked attempts,
cancel, 404 across businesses, 503 when not configured, the payer page, single/reusable, expiry."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from payops.sandbox import SandboxConfig, create_app
from payops.sandbox.clock import iso

from tests.sandbox.sandbox_support import Api, acme, ref


def fixed(amount: str = "50.00", **extra) -> dict:
    return {"reference": ref("chk"), "currency": "GHS", "amountType": "fixed", "amount": amount, **extra}


def open_(**extra) -> dict:
    return {
        "reference": ref("chk"),
        "currency": "GHS",
        "amountType": "open",
        "minAmount": "5.00",
        "maxAmount": "500.00",
        "suggestedAmounts": ["10.00", "20.00"],
        "usage": "reusable",
        **extra,
    }


def token_path(checkout: dict) -> str:
    return httpx.URL(checkout["url"]).path


async def test_create_fixed_single(api) -> None:
    r = await api.post(
        "/v1/checkouts", fixed(description="Order 12", successUrl="https://shop.example.com/ok")
    )
    assert r.status_code == 201, r.text
    c = r.json()
    uuid.UUID(c["id"])
    assert c["status"] == "open" and c["usage"] == "single" and c["amountType"] == "fixed"
    assert c["amount"] == "50.00" and c["minAmount"] is None and c["maxAmount"] is None
    assert c["environment"] == "test" and c["paymentsCount"] == 0 and c["totalCollected"] == "0.00"
    assert c["expiresAt"] is None and c["paidAt"] is None and c["collectionReference"] is None
    assert c["url"].startswith("http://sandbox/pay/cot_") and "attempts" not in c
    assert c["successUrl"] == "https://shop.example.com/ok"


@pytest.mark.parametrize(
    "body",
    [
        {"amountType": "fixed"},
        {"amountType": "open", "amount": "5.00"},
        {"amountType": "open", "minAmount": "10.00", "maxAmount": "5.00"},
        {"amountType": "open", "minAmount": "10.00", "suggestedAmounts": ["5.00"]},
        {"amountType": "fixed", "amount": "5.00", "suggestedAmounts": ["5.00"]},
        {"amountType": "fixed", "amount": "5.00", "successUrl": "javascript:alert(1)"},
        {"amountType": "fixed", "amount": "5.00", "expiresAt": "2020-01-01T00:00:00Z"},
        {"amountType": "fixed", "amount": "0.10"},
        {"amountType": "fixed", "amount": "5.00", "currency": "USD"},
        {"amountType": "fixed", "amount": "5.00", "usage": "twice"},
    ],
)
async def test_invalid_checkout_is_400(api, body) -> None:
    r = await api.post("/v1/checkouts", {"reference": ref("chk"), "currency": "GHS", **body})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input", r.text


async def test_list_newest_first_status_filter_and_cursor(api) -> None:
    made = [(await api.post("/v1/checkouts", fixed())).json()["id"] for _ in range(5)]
    await api.post(f"/v1/checkouts/{made[0]}/cancel", {})
    page = (await api.get("/v1/checkouts", limit=2)).json()
    assert [c["id"] for c in page["items"]] == made[::-1][:2] and page["nextCursor"]
    page2 = (await api.get("/v1/checkouts", limit=2, cursor=page["nextCursor"])).json()
    page3 = (await api.get("/v1/checkouts", limit=2, cursor=page2["nextCursor"])).json()
    assert [c["id"] for c in page2["items"] + page3["items"]] == made[::-1][2:]
    assert page3["nextCursor"] == ""
    cancelled = (await api.get("/v1/checkouts", status="cancelled")).json()
    assert [c["id"] for c in cancelled["items"]] == [made[0]] and cancelled["nextCursor"] == ""
    for bad in ({"limit": 0}, {"limit": 51}, {"status": "paid-ish"}, {"cursor": "zzz"}):
        assert (await api.get("/v1/checkouts", **bad)).status_code == 400


async def test_other_business_gets_404(api, client) -> None:
    c = (await api.post("/v1/checkouts", fixed())).json()
    other = await acme(client)
    assert (await other.get(f"/v1/checkouts/{c['id']}")).status_code == 404
    assert (await other.post(f"/v1/checkouts/{c['id']}/cancel", {})).status_code == 404
    assert (await other.get("/v1/checkouts")).json()["items"] == []
    assert (await api.get(f"/v1/checkouts/{c['id'].upper()}")).status_code == 200
    assert (await api.get("/v1/checkouts/not-a-uuid")).status_code == 400


async def test_single_checkout_paid_via_payer_page(api, client, clock, demo) -> None:
    c = (await api.post("/v1/checkouts", fixed("50.00"))).json()
    page = await client.get(token_path(c))
    assert page.status_code == 200 and "Demo Business Ltd" in page.text and "GHS 50.00" in page.text
    r = await client.post(token_path(c), data={"provider": "mtn", "msisdn": "233241234567"})
    assert r.status_code == 202 and "233******567" in r.text
    got = (await api.get(f"/v1/checkouts/{c['id']}")).json()
    assert got["status"] == "open" and len(got["attempts"]) == 1
    attempt = got["attempts"][0]
    assert (
        attempt["status"] == "pending" and attempt["payer"] == "233******567" and attempt["amount"] == "50.00"
    )
    assert "233241234567" not in str(got)
    again = await client.post(token_path(c), data={"provider": "mtn", "msisdn": "233241234568"})
    assert again.status_code == 409
    clock.advance(2)
    got = (await api.get(f"/v1/checkouts/{c['id']}")).json()
    assert got["status"] == "paid" and got["paidAt"] == iso(clock.now())
    assert got["collectionReference"] == attempt["collectionReference"]
    assert got["paymentsCount"] == 1 and got["totalCollected"] == "50.00"
    assert got["attempts"][0]["status"] == "succeeded"
    col = (await api.get(f"/v1/collections/{got['collectionReference']}")).json()
    assert col["status"] == "settled" and col["fee"] == "0.75"
    assert (
        await client.post(token_path(c), data={"provider": "mtn", "msisdn": "233241234567"})
    ).status_code == 409
    r = await api.post(f"/v1/checkouts/{c['id']}/cancel", {})
    assert r.status_code == 409 and r.json()["error"]["code"] == "checkout_not_open"


async def test_reusable_open_checkout_counts_settled_payments(api, client, clock) -> None:
    c = (await api.post("/v1/checkouts", open_())).json()
    assert c["suggestedAmounts"] == ["10.00", "20.00"] and c["amount"] is None and c["minAmount"] == "5.00"
    path = token_path(c)
    assert (
        await client.post(path, data={"provider": "mtn", "msisdn": "233241234567", "amount": "1.00"})
    ).status_code == 400
    assert (
        await client.post(path, data={"provider": "calbank", "msisdn": "233241234567", "amount": "10.00"})
    ).status_code == 400
    await client.post(path, data={"provider": "mtn", "msisdn": "233241234567", "amount": "10.00"})
    await client.post(
        path, data={"provider": "telecel", "msisdn": "233201230001", "amount": "20.00"}
    )  # fails
    await client.post(path, data={"provider": "mtn", "msisdn": "233241234999", "amount": "30.50"})
    clock.advance(2)
    got = (await api.get(f"/v1/checkouts/{c['id']}")).json()
    assert got["status"] == "open" and got["paidAt"] is None
    assert got["paymentsCount"] == 2 and got["totalCollected"] == "40.50"
    statuses = [(a["status"], a.get("failureReason")) for a in got["attempts"]]
    assert statuses == [("succeeded", None), ("failed", "payer_declined"), ("succeeded", None)]


async def test_expiry_by_clock_and_cancel(api, client, clock) -> None:
    expires = clock.now() + timedelta(minutes=10)
    c = (await api.post("/v1/checkouts", fixed(expiresAt=iso(expires)))).json()
    assert c["expiresAt"] == iso(expires)
    clock.advance(599)
    await api.login()
    assert (await api.get(f"/v1/checkouts/{c['id']}")).json()["status"] == "open"
    clock.advance(1)
    assert (await api.get(f"/v1/checkouts/{c['id']}")).json()["status"] == "expired"
    assert "expired" in (await client.get(token_path(c))).text
    d = (await api.post("/v1/checkouts", fixed())).json()
    first = await api.post(f"/v1/checkouts/{d['id']}/cancel", {})
    assert first.status_code == 200 and first.json()["status"] == "cancelled"
    assert (await api.post(f"/v1/checkouts/{d['id']}/cancel")).status_code == 200
    assert (
        await client.post(token_path(d), data={"provider": "mtn", "msisdn": "233241234567"})
    ).status_code == 409


async def test_idempotent_create_and_duplicate_reference(api) -> None:
    body = fixed()
    a = await api.post("/v1/checkouts", body, key="k-chk")
    b = await api.post("/v1/checkouts", body, key="k-chk")
    assert a.content == b.content
    clash = await api.post("/v1/checkouts", {**body, "amount": "51.00"})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "duplicate_reference"


async def test_permissions(client) -> None:
    from tests.sandbox.sandbox_support import api_for

    reader = await api_for(client, ["collections.read"])
    assert (await reader.post("/v1/checkouts", fixed())).status_code == 403
    assert (await reader.get("/v1/checkouts")).status_code == 200


async def test_unconfigured_deployment_is_503(clock) -> None:
    app = create_app(SandboxConfig(clock=clock, checkout_configured=False))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as c:
        api = Api(c)
        await api.login()
        for r in (
            await api.post("/v1/checkouts", fixed()),
            await api.get("/v1/checkouts"),
            await api.get(f"/v1/checkouts/{uuid.uuid4()}"),
        ):
            assert r.status_code == 503 and r.json()["error"] == {
                "code": "checkout_unavailable",
                "message": "internal server error",
            }
        assert (
            await api.post(
                "/v1/collections",
                {
                    "reference": ref("c"),
                    "amount": "5.00",
                    "currency": "GHS",
                    "provider": "mtn",
                    "payer": {"type": "msisdn", "value": "233241234567"},
                },
            )
        ).status_code == 202
