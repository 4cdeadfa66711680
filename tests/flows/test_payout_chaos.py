"""Chaos: faults (504s after commit among them), 429s and a 20-second token: every row final, none twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flows.payouts import PayoutRunParams, payout_spreadsheet
from sandbox import SandboxConfig, SandboxServer
from tests.flows.sheets import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


def test_faults_rate_limits_and_short_tokens_change_nothing(
    prefect_harness, tmp_path: Path, monkeypatch
) -> None:
    config = SandboxConfig(
        fault_rate=0.1, fault_seed=11, rate_limit_per_s=6, rate_burst=6, token_ttl_s=20, delivery_delay_s=12
    )
    rows = payroll_rows(1050, prefix="CH", specials={4: "0002"})
    sheet = write_sheet(tmp_path / "chaos.xlsx", rows)
    with SandboxServer(config) as server:
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        s = asyncio.run(
            payout_spreadsheet(
                PayoutRunParams(
                    source=str(sheet),
                    label="chaos",
                    report_dir=str(tmp_path),
                    poll_deadline_s=180,
                    rate_limit_per_s=40,
                )
            )
        )
        stats = emulator_stats(server.base_url)
    assert s["outcome"] == "completed" and s["not_final"] == []
    assert s["payouts_by_status"] == {"delivered": 1049, "failed": 1}
    assert stats["payouts"] == 1050
    # The chaos really happened: injected faults (504s after commit among them), 429s, more than one token.
    requests = stats["requests"]
    assert requests.get("fault 504 after commit", 0) > 0
    assert sum(v for k, v in requests.items() if k.startswith("fault")) > 5
    assert requests.get("status 429", 0) > 0
    assert requests.get("POST /auth/v1/oauth/token", 0) >= 2
    assert s["api_calls"]["POST /v1/payout-batches"] > 11  # retries of faulted or throttled batch posts
