"""The pure pieces of `benchmarks/payouts_e2e.py`'s scale and kill modes (the modes themselves are run, not
unit-tested: they start servers and take tens of seconds)."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from payops.sandbox.seed import DEFAULT_SEED

from benchmarks.emulator import sized_seed
from benchmarks.exactly_once import Ledger
from benchmarks.payroll import cycle_sheet, iter_payees, payees
from benchmarks.results import row, split_benchmark_args
from benchmarks.scale_runs import calls_per_s


def test_payees_are_distinct_and_the_same_for_a_seed() -> None:
    people = payees(3000)
    assert len({number for number, _ in people}) == 3000
    assert people[:50] == list(iter_payees(3000))[:50]
    assert people != payees(3000, seed=16)


def test_a_csv_payroll_is_counted_and_totalled_as_written(tmp_path: Path) -> None:
    sheet = cycle_sheet(tmp_path, "p", "csv", 120, "C1", seed=1)
    with sheet.path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    assert sheet.path.suffix == ".csv" and sheet.rows == len(rows) == 120
    assert sheet.amount_total == sum(Decimal(r[2]) for r in rows)
    assert all(r[1] for r in rows) and rows[7][0] == "C1-000007"


def test_the_seed_is_raised_for_a_large_sheet_and_never_lowered() -> None:
    big = sized_seed(Decimal("85000000.00"))["businesses"][0]["environments"]["test"]
    assert big["wallet"]["GHS"] == "255000000.00"
    assert big["limits"]["GHS"]["daily"] == "255000000.00"
    assert big["limits"]["GHS"]["monthly"] == "500000000.00"  # the default is higher still
    small = sized_seed(Decimal("100.00"))
    assert small == DEFAULT_SEED


def test_the_ledger_finds_duplicates_gaps_and_strangers() -> None:
    ledger = Ledger(3, "C1")
    for reference in ("C1-000000", "C1-000001", "C1-000001", "C1-000003", "other-1"):
        ledger.add(reference, Decimal("10.50"), "delivered")
    figures = ledger.figures()
    assert figures["rows_paid"] == 2 and figures["rows_unpaid"] == 1
    assert figures["rows_paid_more_than_once"] == 1
    assert figures["foreign_references"] == ["C1-000003", "other-1"]
    assert figures["payouts"] == 5 and figures["amount_total"] == "31.50"


def test_calls_per_second_leave_the_preflight_out_of_send_and_poll() -> None:
    run = {
        "wall_s": 10.0,
        "api_calls_total": 1030,
        "api_calls": {
            "GET /v1/party-lookups": 1000,
            "POST /v1/payout-batches": 10,
            "GET /v1/transactions": 20,
        },
        "phase_durations_s": {"preflight": 6.0, "submit": 1.0, "poll": 2.0},
    }
    rates = calls_per_s(run)
    assert rates["over_wall"] == 103.0 and rates["send_and_poll_calls"] == 30
    assert rates["over_send_and_poll"] == 10.0 and rates["api_phases_share_of_wall"] == 0.9


def test_the_benchmark_arguments_follow_the_first_double_dash() -> None:
    assert split_benchmark_args(["run", "payouts_e2e", "--as", "x", "--", "--rows", "5", "--", "y"]) == (
        ["run", "payouts_e2e", "--as", "x"],
        ["--rows", "5", "--", "y"],
    )
    assert split_benchmark_args(["table"]) == (["table"], [])


def test_a_kill_result_renders_as_a_row() -> None:
    result = {
        "mode": "kill_mid_run",
        "rows": 2000,
        "format": "csv",
        "sheet_written": {"rows": 2000, "amount_total": "171214.14"},
        "kill": {"after_s": 6.2, "rows_paid": 600, "rows_paid_share": 0.3},
        "rerun": {"wall_s": 3.9},
        "emulator_after_rerun": {
            "payouts": 2000,
            "rows_paid": 2000,
            "rows_paid_more_than_once": 0,
            "amount_total": "171214.14",
        },
        "replayed_payouts": 600,
        "exactly_once": True,
        "targets": {"exactly_once": True, "killed_mid_send": False},
    }
    saved = {
        "benchmark": "payouts_e2e",
        "command": "benchmarks/payouts_e2e.py --kill-mid-run",
        "commit": "abc1234",
        "machine": {"cpus": 2},
        "result": result,
    }
    _, targets, figure, baseline, _, _ = row(saved)
    assert targets == "exactly once after a SIGKILL ✓; killed mid-send (20% to 80% paid) ✗ **missed**"
    assert "600 paid (30%)" in figure and "replayed 600" in figure and "exactly once **true**" in figure
    assert baseline == "the sheet: 2,000 rows, 171214.14 in all"
