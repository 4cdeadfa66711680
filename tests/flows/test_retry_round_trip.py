"""Pay a real payroll export with failures, retry its failed rows, retry the retry: each retry sheet is
accepted with zero invalid rows and pays exactly the failed and refused rows, once (emulator, xlsx and csv,
their own header names and number formats). The intake-level property test is
tests/tasks/test_retry_round_trip.py."""

from __future__ import annotations

import asyncio
import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpyxl import Workbook
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store import PayopsSettings, upgrade_database
from payops.store.retries import RetryRows
from payops.tasks.payouts.retry_sheet import prepare_retry

from tests.flows.support import emulator_stats, in_emulator_env

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    return in_emulator_env(server, monkeypatch)


# An HR export: its own reference header, "Full Name", an ID column payops ignores, numbers as people write
# them; a row over the per-transaction limit (refused by the service) and two rows failing at the provider.
XLSX_HEADER = [
    "Payment Reference",
    "Full Name",
    "Employee ID",
    "Amount (GHS)",
    "Currency",
    "Network",
    "Phone",
]
XLSX_ROWS = [
    ["PR-0001", "Ama Mensah", "E-1", "1,250.00", "GHS", "MTN", "+233 24 555 1001"],
    ["PR-0002", "Kofi Boateng", "E-2", "GH₵ 300.50", "GHS", "MTN", "+233 24 555 0001"],
    ["PR-0003", "Yaa Quaye", "E-3", 99.5, "ghs", "Telecel", "020 555 1003"],
    ["PR-0004", "Esi Owusu", "E-4", "100,000.01", "GHS", "mtn", "0245551004"],
    ["PR-0005", "Kwame Asante", "E-5", "75", "GHS", "Airtel Tigo", "00233265550002"],
]
# A bank's csv: semicolons, no reference column (payops derives them), an extra column kept.
CSV_HEADER = ["Beneficiary Name", "Mobile Money Number", "Amount", "Currency", "Mobile Network", "Dept"]
CSV_ROWS = [
    ["Abena Darko", "024 555 2001", "10.00", "GHS", "mtn", "ops"],
    ["Kojo Mensah", "233245550001", "20.00", "GHS", "mtn", "ops"],
    ["Efua Sarpong", "+233245552003", "30.00", "GHS", "mtn", "finance"],
]


def _xlsx(path: Path) -> Path:
    book = Workbook()
    sheet = book.active
    sheet.title = "Payroll"
    for row in [XLSX_HEADER, *XLSX_ROWS]:
        sheet.append(row)
    book.save(path)
    return path


def _csv(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter=";").writerows([CSV_HEADER, *CSV_ROWS])
    return path


def _pay(source: str, label: str | None, reports: str, column_map: str = "") -> dict:
    params = PayoutRunParams(
        source=source,
        label=label or "",
        report_dir=reports,
        poll_deadline_s=60,
        check_names=False,
        allow_preflight_problems=True,  # the row over the limit goes to the service, which refuses it
        column_map=column_map,
    )
    return run_summary(asyncio.run(payout_spreadsheet(params, return_state=True))).as_json()


@pytest.mark.parametrize(
    ("build", "failed", "refused"), [(_xlsx, 2, 1), (_csv, 1, 0)], ids=["hr-export-xlsx", "bank-csv"]
)
def test_pay_retry_and_retry_the_retry_pay_exactly_the_failed_rows(
    prefect_harness, env: SandboxServer, tmp_path: Path, build, failed: int, refused: int
) -> None:
    reports = str(tmp_path / "reports")
    sheet = build(tmp_path / f"payroll.{build.__name__[1:]}")
    before = emulator_stats(env.base_url)["payouts"]
    first = _pay(str(sheet), None, reports)
    rows = first["rows_total"]
    assert first["rows_invalid"] == 0 and first["outcome"] == "completed"
    assert first["payouts_by_status"].get("failed", 0) == failed and first["refused_items"] == refused
    label = first["label"]
    for attempt in (1, 2):
        engine = upgrade_database(PayopsSettings.from_env())  # the session database: the rows retries claim
        try:
            retry = prepare_retry(reports, label, RetryRows(engine))
        finally:
            engine.dispose()
        assert retry.label == f"{first['label']}-retry{attempt}" and retry.rows == failed + refused
        again = _pay(retry.source, retry.label, reports, retry.column_map)
        assert again["rows_invalid"] == 0 and again["errors"] == [], again["errors"]
        assert again["rows_total"] == failed + refused
        assert again["payouts_by_status"] == {"failed": failed} and again["refused_items"] == refused
        assert again["ignored_columns"] == first["ignored_columns"]
        label = retry.label
    assert emulator_stats(env.base_url)["payouts"] - before == (rows - refused) + failed + failed
