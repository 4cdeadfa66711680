"""Load check: N concurrent clients posting payout batches against a running emulator.

``python -m tests.sandbox.sandbox_load --seconds 20`` runs the full issue-3 check (50 clients, batches of
100, 20 s) on its own SandboxServer; the test suite runs it shorter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import ssl
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
from payops.sandbox import SandboxConfig, SandboxServer


@dataclass
class LoadResult:
    """What the clients saw."""

    batches: int = 0
    replays: int = 0
    replay_mismatches: int = 0
    accepted: dict[str, Decimal] = field(default_factory=dict)  # reference -> payerAmount
    refused: int = 0
    errors: list[str] = field(default_factory=list)


def _batch(client_no: int, n: int, size: int, rng: random.Random) -> dict[str, Any]:
    items = [
        {
            "reference": f"c{client_no}-b{n}-i{i}",
            "amount": f"{rng.randint(1, 100)}.{rng.randint(0, 99):02d}",
            "currency": "GHS",
            "provider": "mtn",
            "destination": {"type": "msisdn", "value": f"23324{rng.randint(100000, 999999)}9"},
        }
        for i in range(size)
    ]
    return {"reference": f"c{client_no}-b{n}", "items": items}


async def _client(
    base_url: str,
    token: str,
    client_no: int,
    size: int,
    deadline: float,
    out: LoadResult,
    tls: ssl.SSLContext,
) -> None:
    rng = random.Random(client_no)
    sent: list[tuple[str, dict[str, Any], bytes]] = []
    headers = {"Authorization": f"Bearer {token}"}
    # one connection pool per client; the TLS context is shared (building 50 of them takes seconds)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60, verify=tls) as http:
        n = 0
        while time.monotonic() < deadline:
            body, key = _batch(client_no, n, size, rng), str(uuid.uuid4())
            r = await http.post("/v1/payout-batches", json=body, headers={"Idempotency-Key": key})
            if r.status_code != 200:
                out.errors.append(f"{r.status_code} {r.text[:200]}")
                continue
            out.batches += 1
            sent.append((key, body, r.content))
            for item in r.json()["items"]:
                if item["status"] == 202:
                    if item["reference"] in out.accepted:
                        out.errors.append(f"accepted twice: {item['reference']}")
                    out.accepted[item["reference"]] = Decimal(item["payout"]["payerAmount"])
                else:
                    out.refused += 1
            n += 1
        for key, body, content in sent[:: max(1, len(sent) // 4)] + sent[-1:]:
            again = await http.post(
                "/v1/payout-batches",
                content=json.dumps(body).encode(),
                headers={"Idempotency-Key": key, "Content-Type": "application/json"},
            )
            out.replays += 1
            if again.status_code != 200 or again.content != content:
                out.replay_mismatches += 1


async def run_load(base_url: str, *, clients: int = 50, size: int = 100, seconds: float = 20.0) -> LoadResult:
    """Run ``clients`` concurrent batch senders for ``seconds`` (replays checked at the end)."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        r = await http.post(
            "/auth/v1/oauth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": "demo-test-client",
                "client_secret": "demo-test-secret",
                "resource": "urn:payments-api",
            },
        )
        token = r.json()["access_token"]
    out = LoadResult()
    tls = ssl.create_default_context()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(_client(base_url, token, i, size, deadline, out, tls) for i in range(clients)))
    return out


def main() -> None:
    """CLI entry: run the load against a fresh SandboxServer and print a JSON summary."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    with SandboxServer(SandboxConfig(delivery_delay_s=0.2, token_ttl_s=3600)) as server:
        result = asyncio.run(
            run_load(server.base_url, clients=args.clients, size=args.size, seconds=args.seconds)
        )
        time.sleep(0.5)
        server.state.advance_all()
        env = server.state.env("demo", "test")
        print(
            json.dumps(
                {
                    "batches": result.batches,
                    "payouts": len(env.payouts),
                    "accepted": len(result.accepted),
                    "replays": result.replays,
                    "replay_mismatches": result.replay_mismatches,
                    "errors": len(result.errors),
                    "balanced": env.wallet.balanced(),
                }
            )
        )


if __name__ == "__main__":
    main()
