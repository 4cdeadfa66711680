"""Spec § Errors 429 and 5xx: per-credential token bucket, seeded fault injection, lost answers."""

from __future__ import annotations

from collections import Counter

import httpx
from payops.sandbox import SandboxConfig, create_app

from tests.sandbox.sandbox_support import Api, payout


def client_for(config: SandboxConfig) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(config)), base_url="http://s")


async def test_rate_limit_per_credential(clock) -> None:
    async with client_for(SandboxConfig(clock=clock, rate_limit_per_s=2, rate_burst=3)) as client:
        demo, acme = Api(client), Api(client, "acme-test-client", "acme-test-secret")
        await demo.login()
        await acme.login()
        statuses = [(await demo.get("/v1/wallet")).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        r = await demo.get("/v1/wallet")
        assert r.json()["error"]["code"] == "rate_limited"
        assert r.headers["Retry-After"] == "1" and r.headers["Request-Id"]
        assert (await acme.get("/v1/wallet")).status_code == 200  # another credential has its own bucket
        clock.advance(0.5)  # refills one token
        assert (await demo.get("/v1/wallet")).status_code == 200
        assert (await demo.get("/v1/wallet")).status_code == 429


async def test_retry_after_grows_with_slow_refill(clock) -> None:
    async with client_for(SandboxConfig(clock=clock, rate_limit_per_s=0.2, rate_burst=1)) as client:
        api = Api(client)
        await api.login()
        assert (await api.get("/v1/wallet")).status_code == 200
        assert (await api.get("/v1/wallet")).headers["Retry-After"] == "5"


async def test_faults_are_seeded_and_5xx_messages_fixed(clock) -> None:
    async def run() -> list[int]:
        async with client_for(SandboxConfig(clock=clock, fault_rate=0.5, fault_seed=7)) as client:
            api = Api(client)
            await api.login()  # the token endpoint is exempt
            out = []
            for _ in range(40):
                r = await api.get("/v1/wallet")
                out.append(r.status_code)
                if r.status_code >= 500:
                    assert r.json()["error"]["message"] == "internal server error"
                    assert r.headers["Request-Id"]
            return out

    first, second = await run(), await run()
    assert first == second
    counts = Counter(first)
    assert counts[200] > 5 and {500, 502, 503, 504} & set(counts)
    assert set(counts) <= {200, 500, 502, 503, 504}


async def test_token_endpoint_exempt_unless_configured(clock) -> None:
    async with client_for(SandboxConfig(clock=clock, fault_rate=1.0, fault_seed=1)) as client:
        for _ in range(5):
            await Api(client).login()
        api = Api(client)
        await api.login()
        assert (await api.get("/v1/wallet")).status_code >= 500
    async with client_for(SandboxConfig(clock=clock, fault_rate=1.0, fault_token_endpoint=True)) as client:
        r = await client.post("/auth/v1/oauth/token", data={})
        assert r.status_code >= 500


async def test_504_after_commit_then_replay_returns_stored_result(clock) -> None:
    app = create_app(SandboxConfig(clock=clock, fault_rate=1.0, fault_seed=3))
    sandbox = app.state.sandbox
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as client:
        api = Api(client)
        await api.login()
        lost = committed = 0
        demo = sandbox.state.env("demo", "test")
        for i in range(30):
            body = payout(f"f{i}")
            r = await api.post("/v1/payouts", body, key=f"k{i}")
            assert r.status_code >= 500
            if f"f{i}" in demo.payouts:
                assert r.status_code == 504
                committed += 1
                sandbox.faults.rate = 0.0
                replay = await api.post("/v1/payouts", body, key=f"k{i}")
                sandbox.faults.rate = 1.0
                assert replay.status_code == 202 and replay.json()["reference"] == f"f{i}"
                assert replay.json()["createdAt"] == "2025-03-12T10:00:00.000Z"
            else:
                lost += 1
        assert committed > 0 and lost > 0
        assert len(demo.payouts) == committed and demo.wallet.balanced()
