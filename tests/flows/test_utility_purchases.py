"""`utility-purchases` end to end against the emulator (real uvicorn on 127.0.0.1, Prefect's test server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.flows.outcomes import run_summary
from payops.flows.utility_purchases import UtilityRunParams, utility_purchases
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.support import emulator_stats
from tests.flows.support import write_csv as write_rows_csv

pytestmark = pytest.mark.e2e

HEADERS = ["msisdn", "product", "network", "category", "amount", "funding", "payer provider", "payer msisdn"]
MIXED = [
    ["0245550010", "mtn-airtime", "", "", "5.00", "", "", ""],  # delivered
    ["0245550011", "mtn-data-1gb", "", "", "", "wallet", "", ""],  # fixed: blank amount = price
    ["+233 24 555 0012", "", "mtn", "data", "45.00", "", "", ""],  # network + category → mtn-data-5gb
    ["0205550013", "telecel-airtime", "", "", "12.50", "collection", "telecel", "0205559020"],
    ["0245550001", "mtn-airtime", "", "", "3.00", "", "", ""],  # vend_failed → failed
    ["0245550002", "mtn-airtime", "", "", "4.00", "", "", ""],  # refunding → refunded
    ["0245550004", "mtn-airtime", "", "", "6.00", "", "", ""],  # outcome_unknown, stays
    ["0245550005", "mtn-airtime", "", "", "7.00", "", "", ""],  # refund_failed, stays
]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.4)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    return server


def write_csv(path: Path, rows: list[list[str]], headers: list[str] = HEADERS) -> Path:
    """A purchases sheet (its own columns) as the shared csv writer writes payrolls."""
    return write_rows_csv(path, rows, headers)


def purchases(server: SandboxServer) -> dict:

    return server.state.envs[("demo", "test")].resources.purchases


def posts(server: SandboxServer) -> int:
    return emulator_stats(server.base_url)["requests"].get("POST /v1/utility-purchases", 0)


def run(params: UtilityRunParams) -> dict:
    return run_summary(asyncio.run(utility_purchases(params, return_state=True)))


def test_mixed_sheet_reaches_final_and_a_rerun_buys_nothing_twice(
    prefect_harness, env, tmp_path: Path
) -> None:
    sheet = write_csv(tmp_path / "mixed.csv", MIXED)
    params = UtilityRunParams(
        source=str(sheet), label="util mixed/1", report_dir=str(tmp_path / "reports"), poll_deadline_s=3
    )
    before = len(purchases(env))
    first = run(params)
    assert first["outcome"] == "completed" and first["rows_valid"] == 8 and first["purchases"] == 8
    assert len(purchases(env)) - before == 8
    assert first["purchases_by_status"] == {
        "delivered": 4,
        "failed": 1,
        "outcome_unknown": 1,
        "refund_failed": 1,
        "refunded": 1,
    }
    refs = sorted(purchases(env))[-8:]
    assert all(r.startswith("util-mixed-1-") for r in refs)  # label slug + digest, then -r<row>
    assert first["unresolved"] == sorted(r for r in first["not_final"])
    assert len(first["unresolved"]) == 2 and first["deadline_reached"] is True
    assert first["quotes"] == 8 and first["api_calls"]["GET /v1/fee-quotes/utilities"] == 8
    assert first["amount_total"] == "92.50" and first["replayed_purchases"] == 0

    wb = load_workbook(first["report_files"]["xlsx"])
    rows = list(wb["results"].iter_rows(values_only=True))
    col = {h: i for i, h in enumerate(rows[0])}
    by_msisdn = {r[col["msisdn"]]: r for r in rows[1:]}
    assert by_msisdn["0245550011"][col["Amount (sent)"]] == "10.00"
    assert by_msisdn["+233 24 555 0012"][col["Product"]] == "mtn-data-5gb"  # text (quote prefix), no formula
    assert by_msisdn["0245550004"][col["Purchase status"]] == "outcome_unknown"
    assert by_msisdn["0245550005"][col["Purchase status"]] == "refund_failed"
    assert by_msisdn["0245550010"][col["Fee"]] == "0.10" and by_msisdn["0245550010"][col["Gross"]] == "5.10"
    fill = wb["results"].cell(1 + 1 + 6, 1).fill.fgColor.rgb  # row of 0245550004 is highlighted
    assert fill.endswith("FFF2CC")

    count, sent = len(purchases(env)), posts(env)
    second = run(params)
    assert len(purchases(env)) == count, "a re-run bought again"
    assert posts(env) - sent == 8  # the same requests replayed under the same keys
    assert second["replayed_purchases"] == 8 and second["unresolved"] == first["unresolved"]
    assert second["purchases_by_status"]["outcome_unknown"] == 1


def test_invalid_sheet_is_refused_with_row_and_column_errors_and_nothing_sent(
    prefect_harness, env, tmp_path: Path
) -> None:
    rows = [
        ["0245550020", "mtn-airtime", "", "", "5.00", "", "", ""],  # fine
        ["241234567", "mtn-airtime", "", "", "5.00", "", "", ""],  # leading zero dropped
        ["0245550022", "mtn-data-9gb", "", "", "5.00", "", "", ""],  # unknown product
        ["0245550023", "mtn-airtime", "", "", "2000.00", "", "", ""],  # above the flexi max
        ["0245550024", "mtn-data-1gb", "", "", "12.00", "", "", ""],  # not the fixed price
        ["0245550025", "mtn-airtime", "", "", "USD 5", "", "", ""],  # not GHS
        ["0245550026", "mtn-airtime", "", "", "5.00", "collection", "", ""],  # collection without payer
    ]
    sheet = write_csv(tmp_path / "bad.csv", rows)
    count, sent = len(purchases(env)), posts(env)
    s = run(UtilityRunParams(source=str(sheet), label="bad", report_dir=str(tmp_path / "reports")))
    assert s["outcome"] == "invalid_input" and s["rows_invalid"] == 6 and s["rows_valid"] == 1
    located = {(e["row"], e["column"]) for e in s["errors"]}
    assert {(3, "msisdn"), (4, "product"), (5, "amount"), (6, "amount"), (7, "amount")} <= located
    assert {(8, "payer provider"), (8, "payer msisdn")} <= located
    assert len(purchases(env)) == count and posts(env) == sent
    assert "GET /v1/fee-quotes/utilities" not in s["api_calls"]
    assert Path(s["report_files"]["validation"]).is_file()


def test_dry_run_quotes_and_buys_nothing(prefect_harness, env, tmp_path: Path) -> None:
    rows = [["0245550030", "mtn-airtime", "", "", "5.00", "", "", ""]] * 3  # one distinct quote
    sheet = write_csv(tmp_path / "dry.csv", rows)
    count = len(purchases(env))
    s = run(UtilityRunParams(source=str(sheet), dry_run=True, report_dir=str(tmp_path / "reports")))
    assert s["outcome"] == "dry_run" and s["quotes"] == 1 and s["gross_total"] == "15.30"
    assert s["api_calls"]["GET /v1/fee-quotes/utilities"] == 1
    assert len(s["warnings"]) == 2 and len(purchases(env)) == count


def test_cli_exit_codes_and_no_traceback(prefect_harness, env, tmp_path: Path) -> None:
    import json

    from payops.deployments.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    demo = Path(__file__).resolve().parents[2] / "examples" / "utilities-demo.csv"
    ok = runner.invoke(app, ["purchases", str(demo), "--dry-run", "--json", "--report-dir", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout.strip().splitlines()[-1])["outcome"] == "dry_run"
    bad = write_csv(tmp_path / "bad.csv", [["12", "mtn-airtime", "", "", "5.00", "", "", ""]])
    refused = runner.invoke(app, ["purchases", str(bad), "--report-dir", str(tmp_path)])
    assert refused.exit_code == 2 and "row 2, column msisdn" in refused.output
    missing = runner.invoke(app, ["utilities", str(tmp_path / "nope.csv")])  # the former name still works
    assert missing.exit_code == 2 and "file not found" in missing.output
    assert "Traceback" not in refused.output + missing.output


def test_a_run_begun_under_the_old_key_form_buys_nothing_twice(
    prefect_harness, env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Purchase keys once hashed ``json.dumps(body, sort_keys=True)``; they now hash the one canonical form
    (`canonical_json`). A run sent before that change and run again after it sends new keys with the same
    references and bodies: the service answers each with its first answer, so nothing is bought twice."""
    import hashlib
    import json

    from payops.tasks import utility_purchases as purchase_tasks
    from payops.tasks.wire.references import purchase_idempotency_key

    def old_key(label: str, sheet_row: int, body: dict) -> str:
        def digest(data: str | bytes, n: int) -> str:
            return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:n]

        canonical = json.dumps(body, sort_keys=True).encode()
        return f"payops-utility:{digest(label, 16)}:{sheet_row}:{digest(canonical, 24)}"

    body = {"reference": "r", "productId": "mtn-airtime", "amount": "5.00", "note": "Ama Owusú"}
    assert old_key("l", 2, body) != purchase_idempotency_key("l", 2, body)  # the forms differ

    sheet = write_csv(tmp_path / "old-keys.csv", MIXED[:4])
    params = UtilityRunParams(
        source=str(sheet), label="util old keys", report_dir=str(tmp_path / "reports"), poll_deadline_s=3
    )
    before = len(purchases(env))
    with monkeypatch.context() as m:
        m.setattr(purchase_tasks, "purchase_idempotency_key", old_key)
        first = run(params)
    assert first["outcome"] == "completed" and first["purchases"] == 4
    assert len(purchases(env)) - before == 4

    sent = posts(env)
    second = run(params)
    assert posts(env) - sent == 4  # every row sent again, under its new key
    assert len(purchases(env)) - before == 4, "a new key bought again"
    assert second["replayed_purchases"] == 4 and second["purchases_by_status"] == first["purchases_by_status"]
    assert second["amount_total"] == first["amount_total"]
