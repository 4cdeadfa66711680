"""Chaos: faults (504s after commit among them), 429s and a 20-second token: every row final, none twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, create_app

from tests.flows.support import (
    StatusCounter,
    demo_env,
    emulator_stats,
    payroll_rows,
    serve_in_thread,
    write_sheet,
)

pytestmark = pytest.mark.e2e


def test_faults_rate_limits_and_short_tokens_change_nothing(
    prefect_harness, tmp_path: Path, monkeypatch
) -> None:
    config = SandboxConfig(
        fault_rate=0.1, fault_seed=11, rate_limit_per_s=6, rate_burst=6, token_ttl_s=20, delivery_delay_s=12
    )
    app = StatusCounter(create_app(config))
    rows = payroll_rows(1050, prefix="CH", specials={4: "0002"})
    sheet = write_sheet(tmp_path / "chaos.xlsx", rows)
    with serve_in_thread(app) as base:
        for k, v in demo_env(base).items():
            monkeypatch.setenv(k, v)
        s = asyncio.run(
            payout_spreadsheet(
                PayoutRunParams(
                    source=str(sheet),
                    label="chaos",
                    report_dir=str(tmp_path / "reports"),
                    poll_deadline_s=180,
                    rate_limit_per_s=40,
                )
            )
        )
        stats = emulator_stats(base)
    assert s["outcome"] == "completed" and s["not_final"] == []
    assert s["payouts_by_status"] == {"delivered": 1049, "failed": 1}
    assert stats["payouts"] == 1050  # no payout lost, none twice
    # The chaos really happened: 5xx faults, 429s, and tokens renewed (20 s lifetime, run longer than that).
    assert sum(app.statuses[c] for c in (500, 502, 503, 504)) > 5 and app.statuses[429] > 0
    # One shared client per run: one token, renewed before its 20 s lifetime ran out (never one per request).
    assert stats["requests"].get("POST /auth/v1/oauth/token", 0) >= 2


class LoseFirstAnswer:
    """ASGI middleware: each batch POST's first attempt is committed, then answered 504 (answer lost)."""

    def __init__(self, app) -> None:
        self.app = app
        self.seen: set[bytes] = set()
        self.lost = 0

    async def __call__(self, scope, receive, send) -> None:
        key = dict(scope.get("headers", [])).get(b"idempotency-key", b"")
        if scope["type"] != "http" or scope["path"] != "/v1/payout-batches" or key in self.seen:
            return await self.app(scope, receive, send)
        self.seen.add(key)

        async def swallow(_message) -> None:
            return None

        await self.app(scope, receive, swallow)  # the batch is committed; its answer never reaches the client
        self.lost += 1
        body = b'{"error":{"code":"upstream_timeout","message":"internal server error"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 504,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def test_every_batch_answer_lost_after_commit_is_replayed_not_resent(
    prefect_harness, tmp_path: Path, monkeypatch
):
    wrapped = LoseFirstAnswer(create_app(SandboxConfig(delivery_delay_s=0.5)))
    rows = payroll_rows(350, prefix="LA")
    with serve_in_thread(wrapped) as base:
        for k, v in demo_env(base).items():
            monkeypatch.setenv(k, v)
        s = asyncio.run(
            payout_spreadsheet(
                PayoutRunParams(
                    source=str(write_sheet(tmp_path / "lost.xlsx", rows)),
                    label="lost",
                    poll_deadline_s=60,
                    report_dir=str(tmp_path / "reports"),
                )
            )
        )
        stats = emulator_stats(base)
    assert wrapped.lost == 4  # every one of the 4 batches lost its first answer
    assert s["api_calls"]["POST /v1/payout-batches"] == 8  # each retried once with the same key and body
    assert stats["payouts"] == 350 and s["payouts_by_status"] == {"delivered": 350}
