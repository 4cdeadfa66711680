"""Spec § Authentication: token endpoint, 401/403 rules, environments, suspension, Request-Id."""

from __future__ import annotations

import httpx
import jwt
import pytest
from payops.sandbox import SandboxConfig, create_app

from tests.sandbox.sandbox_support import Api, payout

TOKEN_PATH = "/auth/v1/oauth/token"


def form(
    client_id: str = "demo-test-client", secret: str = "demo-test-secret", **over: str
) -> dict[str, str]:
    data = {
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_secret": secret,
        "resource": "urn:payments-api",
    }
    data.update(over)
    return data


async def test_token_is_a_jwt_with_contract_claims(client, app) -> None:
    r = await client.post(TOKEN_PATH, data=form())
    assert r.status_code == 200
    body = r.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 300
    claims = jwt.decode(
        body["access_token"],
        app.state.sandbox.jwt_secret,
        algorithms=["HS256"],
        options={"verify_exp": False},
    )
    assert claims["sub"] == "demo-test-client" and claims["biz"] == "demo" and claims["env"] == "test"
    assert claims["typ"] == "client" and "disbursements.write" in claims["perms"]
    assert claims["exp"] - claims["iat"] == 300


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (form(secret="wrong"), 401, "unauthenticated"),
        (form(client_id="nobody"), 401, "unauthenticated"),
        (form(grant_type="password"), 400, "invalid_input"),
        (form(resource="urn:other"), 400, "invalid_input"),
        ({"grant_type": "client_credentials", "client_id": "demo-test-client"}, 400, "invalid_input"),
    ],
)
async def test_token_endpoint_refusals(client, data, status, code) -> None:
    r = await client.post(TOKEN_PATH, data=data)
    assert r.status_code == status
    assert r.json()["error"]["code"] == code


async def test_missing_invalid_and_expired_tokens_are_401(client, clock) -> None:
    assert (await client.get("/v1/wallet")).status_code == 401
    r = await client.get("/v1/wallet", headers={"Authorization": "Bearer not-a-jwt"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    forged = jwt.encode(
        {"sub": "x", "biz": "demo", "env": "test", "exp": 2**40, "typ": "client"},
        "another-signing-key-of-32-bytes!!",
    )
    assert (await client.get("/v1/wallet", headers={"Authorization": f"Bearer {forged}"})).status_code == 401
    api = Api(client)
    await api.login()
    assert (await api.get("/v1/wallet")).status_code == 200
    clock.advance(299)
    assert (await api.get("/v1/wallet")).status_code == 200
    clock.advance(1)
    r = await api.get("/v1/wallet")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"


async def test_a_token_one_emulator_accepted_is_refused_by_another_with_its_own_key(client, config) -> None:
    """The emulator remembers the tokens whose signature it checked (`sandbox.auth`); a token it signed and
    accepted still means nothing to an emulator that signs with another key, before or after."""
    api = Api(client)
    await api.login()
    assert (await api.get("/v1/wallet")).status_code == 200
    other = create_app(SandboxConfig(clock=config.clock))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://other") as c:
        r = await c.get("/v1/wallet", headers={"Authorization": f"Bearer {api.token}"})
        assert r.status_code == 401 and r.json()["error"]["message"] == "access token is invalid", r.text
    assert (await api.get("/v1/wallet")).status_code == 200


async def test_a_caller_without_a_valid_token_gets_401_even_for_a_malformed_body(client, clock) -> None:
    """FastAPI validates the body before the auth dependency runs; the caller still learns it must log in."""
    key = {"Idempotency-Key": "k-1", "Content-Type": "application/json"}
    for headers in ({}, {"Authorization": "Bearer not-a-jwt"}):
        r = await client.post("/v1/payout-batches", content=b"{not json", headers={**key, **headers})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", r.text
        r = await client.post("/v1/payouts", json={"reference": "x"}, headers={**key, **headers})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", r.text
    api = Api(client)
    await api.login()
    r = await api.post("/v1/payouts", {"reference": "x"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"
    clock.advance(300)  # the token expires: a malformed body is again a 401
    r = await api.post("/v1/payouts", {"reference": "x"})
    assert r.status_code == 401 and r.json()["error"]["message"] == "access token has expired"
    r = await client.post(TOKEN_PATH, data={"grant_type": "client_credentials"})  # no token needed here
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"


async def test_token_ttl_is_configurable(client, config) -> None:
    config.token_ttl_s = 5
    r = await client.post(TOKEN_PATH, data=form())
    assert r.json()["expires_in"] == 5


async def test_user_token_is_forbidden(client) -> None:
    minted = (await client.post("/_sandbox/tokens", json={"typ": "user"})).json()["access_token"]
    r = await client.get("/v1/wallet", headers={"Authorization": f"Bearer {minted}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


async def test_missing_permission_is_forbidden(client) -> None:
    api = Api(client, "demo-test-readonly", "demo-test-readonly-secret")
    await api.login()
    assert (await api.get("/v1/wallet")).status_code == 200
    r = await api.post("/v1/payouts", payout())
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert "disbursements.write" in r.json()["error"]["message"]


async def test_environment_mismatch(client) -> None:
    live = Api(client, "demo-live-client", "demo-live-secret")
    await live.login()
    assert (await live.get("/live/v1/wallet")).status_code == 200
    r = await live.get("/test/v1/wallet")
    assert r.status_code == 403 and r.json()["error"]["code"] == "environment_mismatch"


async def test_test_and_live_data_are_separate(client) -> None:
    test, live = Api(client), Api(client, "demo-live-client", "demo-live-secret")
    await test.login()
    await live.login()
    body = payout("shared-ref")
    assert (await test.post("/v1/payouts", body)).status_code == 202
    assert (await live.get("/v1/payouts/shared-ref")).status_code == 404
    assert (await live.post("/v1/payouts", payout("shared-ref", amount="99.00"))).status_code == 202
    assert (await test.get("/v1/payouts/shared-ref")).json()["amount"] == "10.00"
    assert (await live.get("/v1/wallet")).json()["items"][0]["balances"][
        "GHS"
    ] == "99900.01"  # 99.00 + fee 0.99


async def test_other_business_cannot_read(client) -> None:
    demo, acme = Api(client), Api(client, "acme-test-client", "acme-test-secret")
    await demo.login()
    await acme.login()
    assert (await demo.post("/v1/payouts", payout("demo-only"))).status_code == 202
    assert (await acme.get("/v1/payouts/demo-only")).status_code == 404


async def test_suspended_business(client, api) -> None:
    assert (
        await client.post("/_sandbox/businesses/demo/status", json={"status": "suspended"})
    ).status_code == 200
    r = await client.post(TOKEN_PATH, data=form())
    assert r.status_code == 403 and r.json()["error"]["code"] == "business_suspended"
    r = await api.get("/v1/wallet")  # token issued just before the suspension
    assert r.status_code == 403 and r.json()["error"]["code"] == "business_suspended"
    await client.post("/_sandbox/businesses/demo/status", json={"status": "active"})
    assert (await api.get("/v1/wallet")).status_code == 200


async def test_deactivated_business_cannot_pay(client, api) -> None:
    await client.post("/_sandbox/businesses/demo/status", json={"status": "deactivated"})
    r = await api.post("/v1/payouts", payout())
    assert r.status_code == 403 and r.json()["error"]["code"] == "business_deactivated"
    assert (await api.get("/v1/wallet")).status_code == 200


async def test_every_response_has_request_id(client, api) -> None:
    responses = [
        await client.post(TOKEN_PATH, data=form()),
        await client.post(TOKEN_PATH, data=form(secret="x")),
        await client.get("/v1/wallet"),
        await api.get("/v1/wallet"),
        await api.get("/v1/payouts/nope"),
        await api.post("/v1/payouts", {"reference": "bad ref"}),
        await client.get("/no/such/path"),
        await client.get("/_sandbox/stats"),
    ]
    ids = [r.headers.get("Request-Id") for r in responses]
    assert all(i and i.startswith("req_") for i in ids)
    assert len(set(ids)) == len(ids)
    for r in [responses[i] for i in (1, 2, 4, 5, 6)]:
        assert set(r.json()) == {"error"} and set(r.json()["error"]) == {"code", "message"}
