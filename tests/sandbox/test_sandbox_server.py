"""Public surface, SandboxServer, run_sandbox / ``python -m sandbox``, seed files and admin endpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from payops.sandbox import ManualClock, SandboxConfig, SandboxServer, SystemClock, create_app

from payops import sandbox
from tests.sandbox.sandbox_support import Api, payout

REPO = Path(__file__).resolve().parents[2]


def test_public_surface() -> None:
    assert sorted(sandbox.__all__) == sorted(
        ["Clock", "ManualClock", "SandboxConfig", "SandboxServer", "SystemClock", "create_app", "run_sandbox"]
    )
    cfg = SandboxConfig()
    assert (cfg.rate_limit_per_s, cfg.fault_rate, cfg.token_ttl_s, cfg.delivery_delay_s) == (
        None,
        0.0,
        300,
        2.0,
    )
    assert (cfg.allow_local_webhooks, cfg.checkout_configured, cfg.clock, cfg.seed_file) == (
        False,
        True,
        None,
        None,
    )
    clock = ManualClock()
    before = clock.now()
    assert (clock.advance(1.5) - before).total_seconds() == 1.5
    assert SystemClock().now().tzinfo is not None
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_sandbox_server_runs_and_stops() -> None:
    with SandboxServer(SandboxConfig(delivery_delay_s=0)) as server:
        env = server.env
        assert (
            env["PAYOPS_BASE_URL"] == server.base_url and env["PAYOPS_AUTH_URL"] == f"{server.base_url}/auth"
        )
        assert env["PAYOPS_RESOURCE"] == "urn:payments-api" and env["PAYOPS_CLIENT_ID"] == "demo-test-client"
        token = httpx.post(
            f"{server.auth_url}/v1/oauth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": env["PAYOPS_CLIENT_ID"],
                "client_secret": env["PAYOPS_CLIENT_SECRET"],
                "resource": env["PAYOPS_RESOURCE"],
            },
        ).json()["access_token"]
        h = {"Authorization": f"Bearer {token}", "Idempotency-Key": "k"}
        assert httpx.post(f"{server.base_url}/v1/payouts", json=payout("srv"), headers=h).status_code == 202
        assert server.state.env("demo", "test").payouts["srv"].status == "accepted"
        assert server.app.state.sandbox.state is server.state
        port = server.port
        assert server._thread is not None and server._thread.daemon
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/wallet", timeout=2)


def test_python_m_sandbox_prints_and_writes_env(tmp_path) -> None:
    env_file = tmp_path / "sandbox.env"
    port = sandbox.server.free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--port",
            str(port),
            "--env-file",
            str(env_file),
            "--delivery-delay",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        first = proc.stdout.readline() if proc.stdout else ""
        assert first == f"export PAYOPS_BASE_URL=http://127.0.0.1:{port}\n"
        deadline = time.monotonic() + 15
        while True:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}/auth/v1/oauth/token",
                    data={
                        "grant_type": "client_credentials",
                        "client_id": "demo-test-client",
                        "client_secret": "demo-test-secret",
                        "resource": "urn:payments-api",
                    },
                )
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert r.status_code == 200
        lines = env_file.read_text().splitlines()
        assert env_file.stat().st_mode & 0o777 == 0o600  # it holds the demo credential
        assert (
            lines[0] == first.strip() and lines[1] == f"export PAYOPS_AUTH_URL=http://127.0.0.1:{port}/auth"
        )
        assert {line.split("=")[0] for line in lines} == {
            "export PAYOPS_BASE_URL",
            "export PAYOPS_AUTH_URL",
            "export PAYOPS_CLIENT_ID",
            "export PAYOPS_CLIENT_SECRET",
            "export PAYOPS_RESOURCE",
        }
    finally:
        proc.terminate()
        proc.wait(10)


async def test_seed_file_adds_businesses(tmp_path, clock) -> None:
    seed = {
        "businesses": [
            {
                "id": "kofi",
                "handle": "kofi-shop",
                "name": "Kofi Shop",
                "credentials": [
                    {
                        "clientId": "kofi-test",
                        "clientSecret": "kofi-secret",
                        "environment": "test",
                        "permissions": ["transactions.read"],
                    }
                ],
                "environments": {"test": {"wallet": {"GHS": "123.45"}, "limits": {}}},
            }
        ]
    }
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(seed))
    app = create_app(SandboxConfig(clock=clock, seed_file=path))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as client:
        kofi = Api(client, "kofi-test", "kofi-secret")
        await kofi.login()
        assert (await kofi.get("/v1/wallet")).json()["items"][0]["balances"] == {"GHS": "123.45"}
        assert (await kofi.get("/v1/limits")).json() == {"items": []}
        demo = Api(client)
        await demo.login()  # the defaults stay
        assert (await demo.get("/v1/wallet")).status_code == 200


async def test_admin_clock_and_stats(client, api, clock) -> None:
    await api.post("/v1/payout-batches", {"reference": "b", "items": [payout("a1"), payout("a2")]})
    r = await client.post("/_sandbox/clock/advance", json={"seconds": 2})
    assert r.json() == {"now": "2025-03-12T10:00:02.000Z"}
    stats = (await client.get("/_sandbox/stats")).json()
    demo = stats["businesses"]["demo"]["test"]
    assert demo["payouts"] == 2 and demo["payoutStatuses"] == {"delivered": 2}
    assert demo["ledger"]["GHS"]["debited"] == "21.00" and demo["balanced"] is True
    assert stats["requests"]["POST /v1/payout-batches"] == 1
    assert stats["requests"]["POST /auth/v1/oauth/token"] == 1


async def test_admin_clock_refuses_system_clock() -> None:
    app = create_app(SandboxConfig())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as client:
        r = await client.post("/_sandbox/clock/advance", json={"seconds": 1})
        assert r.status_code == 409


async def test_admin_fund_wallet(client, api) -> None:
    r = await client.post("/_sandbox/businesses/acme/live/wallet/fund", json={"amount": "50.00"})
    assert r.json()["balances"] == {"GHS": "50.00"}
    assert (
        await client.post("/_sandbox/businesses/nope/test/wallet/fund", json={"amount": "1"})
    ).status_code == 404


async def test_unexpected_crash_is_500_internal_with_request_id(client, api, state, monkeypatch) -> None:
    def boom(*_args, **_kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(state.envs[("demo", "test")].wallet, "to_wire", boom)
    r = await api.get("/v1/wallet")
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal", "message": "internal server error"}}
    assert r.headers["Request-Id"]
