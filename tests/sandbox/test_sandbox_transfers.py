"""Spec § POST /v1/transfers, GET /v1/transfers/{reference}, GET /v1/recipients/{handle}."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.sandbox.sandbox_support import acme, api_for, ref


def transfer(
    reference: str | None = None, amount: str = "25.00", handle: str = "acme-traders"
) -> dict[str, str]:
    return {"reference": reference or ref("t"), "handle": handle, "amount": amount, "currency": "GHS"}


def total(state) -> Decimal:
    return sum(
        (
            e.wallet.available["GHS"] + e.wallet.reserved["GHS"]
            for e in state.envs.values()
            if e.environment == "test"
        ),
        Decimal(0),
    )


async def test_transfer_completes_and_conserves_money(api, state) -> None:
    demo, acme_env = state.env("demo", "test"), state.env("acme", "test")
    before = (demo.wallet.available["GHS"], acme_env.wallet.available["GHS"], total(state))
    body = transfer(amount="25.00")
    r = await api.post("/v1/transfers", body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["status"] == "completed" and got["recipientHandle"] == "acme-traders"
    assert got["recipientName"] == "Acme Traders" and "fee" not in got and "failureReason" not in got
    assert demo.wallet.available["GHS"] == before[0] - Decimal("25.00")
    assert acme_env.wallet.available["GHS"] == before[1] + Decimal("25.00")
    assert total(state) == before[2]
    assert demo.wallet.balanced() and acme_env.wallet.balanced()
    assert (await api.get(f"/v1/transfers/{body['reference']}")).json() == got


async def test_events_sender_status_changed_recipient_received(api, state) -> None:
    body = transfer()
    await api.post("/v1/transfers", body)
    demo_types = [
        e.type for e in state.env("demo", "test").events if e.data.get("reference") == body["reference"]
    ]
    acme_types = [
        e.type for e in state.env("acme", "test").events if e.data.get("reference") == body["reference"]
    ]
    assert demo_types == ["transfer.status_changed"]
    assert acme_types == ["transfer.received"]


async def test_transactions_on_both_sides(api, client) -> None:
    body = transfer()
    await api.post("/v1/transfers", body)
    out = (await api.get("/v1/transactions", kind="wallet_transfer")).json()["items"]
    assert [(t["reference"], t["direction"]) for t in out if t["reference"] == body["reference"]] == [
        (body["reference"], "out")
    ]
    other = await acme(client)
    inn = (await other.get("/v1/transactions", kind="wallet_transfer")).json()["items"]
    assert [(t["reference"], t["direction"]) for t in inn if t["reference"] == body["reference"]] == [
        (body["reference"], "in")
    ]


async def test_retry_with_same_key_never_sends_twice(api, state) -> None:
    acme_env = state.env("acme", "test")
    before = acme_env.wallet.available["GHS"]
    body = transfer(amount="10.00")
    first = await api.post("/v1/transfers", body, key="k-tr-1")
    second = await api.post("/v1/transfers", body, key="k-tr-1")
    third = await api.post("/v1/transfers", body)  # same body, new key: the first answer again
    assert first.content == second.content and third.json() == first.json()
    assert acme_env.wallet.available["GHS"] == before + Decimal("10.00")


async def test_reference_reused(api) -> None:
    body = transfer()
    await api.post("/v1/transfers", body)
    r = await api.post("/v1/transfers", {**body, "amount": "26.00"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "reference_reused"


@pytest.mark.parametrize("reference", ["rvr-1", "RVR-abc"])
async def test_reversal_prefix_refused(api, reference) -> None:
    r = await api.post("/v1/transfers", transfer(reference=reference))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"
    assert r.json()["error"]["message"].startswith("reference")


@pytest.mark.parametrize(
    ("amount", "status", "code"),
    [
        ("10.91", 400, "transfer_refused"),
        ("10.92", 409, "transfer_not_held"),
        ("20000000.00", 403, None),
    ],
)
async def test_refusals_move_nothing(api, state, amount, status, code) -> None:
    demo = state.env("demo", "test")
    before = demo.wallet.available["GHS"]
    body = transfer(amount=amount)
    r = await api.post("/v1/transfers", body)
    assert r.status_code == status, r.text
    if code:
        assert r.json()["error"]["code"] == code
    assert demo.wallet.available["GHS"] == before
    assert (await api.get(f"/v1/transfers/{body['reference']}")).status_code == 404


async def test_insufficient_balance_is_transfer_refused(client, state) -> None:
    await client.put(
        "/_sandbox/businesses/acme/test/limits",
        json={
            "limits": {
                "GHS": {"perTransaction": "9000000.00", "daily": "9000000.00", "monthly": "9000000.00"}
            }
        },
    )
    acme_env = state.env("acme", "test")
    over = acme_env.wallet.available["GHS"] + Decimal("0.01")
    other = await acme(client)
    r = await other.post("/v1/transfers", transfer(amount=f"{over:.2f}", handle="demo-business"))
    assert r.status_code == 400 and r.json()["error"]["code"] == "transfer_refused"
    assert acme_env.wallet.available["GHS"] == over - Decimal("0.01")


@pytest.mark.parametrize(
    ("amount", "status", "reason"),
    [("10.93", "declined", "recipient_declined"), ("10.94", "failed", "processing_error")],
)
async def test_declined_and_failed_transfers(api, state, amount, status, reason) -> None:
    before = state.env("demo", "test").wallet.available["GHS"]
    r = await api.post("/v1/transfers", transfer(amount=amount))
    assert r.status_code == 200 and r.json()["status"] == status and r.json()["failureReason"] == reason
    assert state.env("demo", "test").wallet.available["GHS"] == before


async def test_outbound_limit_counts_transfers(api, client) -> None:
    await client.put(
        "/_sandbox/businesses/demo/test/limits",
        json={"limits": {"GHS": {"perTransaction": "1000.00", "daily": "100.00", "monthly": "1000.00"}}},
    )
    assert (await api.post("/v1/transfers", transfer(amount="60.00"))).status_code == 200
    r = await api.post("/v1/transfers", transfer(amount="60.00"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "daily_limit_exceeded"
    limits = (await api.get("/v1/limits")).json()["items"][0]
    assert limits["daily"]["out"]["used"] == "60.00"


async def test_unknown_and_own_handle(api) -> None:
    r = await api.post("/v1/transfers", transfer(handle="nobody-here"))
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = await api.post("/v1/transfers", transfer(handle="demo-business"))
    assert r.status_code == 400 and r.json()["error"]["code"] == "transfer_refused"
    r = await api.post("/v1/transfers", transfer(handle="h" * 41))
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("handle")


async def test_recipient_lookup(api, client) -> None:
    r = await api.get("/v1/recipients/acme-traders")
    assert r.status_code == 200 and r.json() == {"handle": "acme-traders", "name": "Acme Traders"}
    assert (await api.get("/v1/recipients/nobody-here")).status_code == 404
    writer = await api_for(client, ["wallettransfer.write"])
    assert (await writer.get("/v1/recipients/acme-traders")).status_code == 403
    assert (await writer.post("/v1/transfers", transfer())).status_code == 200
    reader = await api_for(client, ["wallettransfer.read"])
    assert (await reader.post("/v1/transfers", transfer())).status_code == 403


async def test_other_business_cannot_read_my_transfer(api, client) -> None:
    body = transfer()
    await api.post("/v1/transfers", body)
    other = await acme(client)
    assert (await other.get(f"/v1/transfers/{body['reference']}")).status_code == 404
