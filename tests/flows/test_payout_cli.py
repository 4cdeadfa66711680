"""`payops payouts` as an operator runs it: exit codes 0/2/3/1, JSON-only stdout, never a traceback."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.support import emulator_stats, payroll_rows, run_payops, write_sheet

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as s:
        yield s


def payops(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_payops(args, env, timeout)


def test_exit_codes_and_json_output(prefect_harness, server: SandboxServer, tmp_path: Path) -> None:
    reports = str(tmp_path / "reports")
    good = write_sheet(tmp_path / "good.xlsx", payroll_rows(3, prefix="CLI"))
    bad_rows = payroll_rows(3, prefix="CLB")
    bad_rows[2][6] = "2.33241E+11"
    bad = write_sheet(tmp_path / "bad.xlsx", bad_rows)
    before = emulator_stats(server.base_url)["payouts"]

    invalid = payops(
        ["payouts", str(bad), "--label", "cli-bad", "--report-dir", reports, "--json"], server.env
    )
    assert invalid.returncode == 2
    summary = json.loads(invalid.stdout)
    assert [(e["row"], e["column"]) for e in summary["errors"]] == [(4, "destination")]
    assert "scientific notation" in summary["errors"][0]["message"]

    dry = payops(
        ["payouts", str(good), "--label", "cli-dry", "--report-dir", reports, "--dry-run", "--json"],
        server.env,
    )
    assert dry.returncode == 0 and json.loads(dry.stdout)["outcome"] == "dry_run"
    assert json.loads(dry.stdout)["fee_total"] == "1.50"  # the pre-flight ran with the credentials

    offline = payops(
        ["payouts", str(good), "--label", "cli-dry2", "--report-dir", reports, "--dry-run", "--json"], {}
    )
    # A dry run that cannot price the sheet (no credentials) says so and exits 2.
    assert offline.returncode == 2
    refused = json.loads(offline.stdout)
    assert refused["outcome"] == "preflight_failed"
    (problem,) = refused["preflight"]["problems"]
    assert problem.startswith("cannot price the sheet without credentials: no Payments credentials: set ")
    assert emulator_stats(server.base_url)["payouts"] == before  # nothing sent so far

    paid = payops(
        ["payouts", str(good), "--label", "cli-good", "--report-dir", reports, "--json"], server.env
    )
    assert paid.returncode == 0
    assert json.loads(paid.stdout)["payouts_by_status"] == {"delivered": 3}  # stdout is the JSON and only it
    assert (tmp_path / "reports" / "cli-good.csv").exists()
    assert emulator_stats(server.base_url)["payouts"] == before + 3


def test_not_approved_is_exit_3(prefect_harness, server: SandboxServer, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "approve.xlsx", payroll_rows(2, prefix="CLA"))
    proc = payops(
        [
            "payouts",
            str(sheet),
            "--label",
            "cli-approve",
            "--report-dir",
            str(tmp_path / "r"),
            "--require-approval",
            "--approval-timeout",
            "10",
        ],
        server.env,
    )
    assert proc.returncode == 3 and "not_approved" in proc.stdout


def test_unreadable_file_and_unreachable_service_get_one_clear_line(prefect_harness, tmp_path: Path) -> None:
    pdf = tmp_path / "payroll.pdf"
    pdf.write_bytes(b"%PDF-1.4 not a sheet")
    proc = payops(["payouts", str(pdf), "--report-dir", str(tmp_path / "r"), "--json"], {})
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["errors"] == [
        {
            "row": None,
            "column": None,
            "message": "unsupported file type '.pdf'; upload .xlsx, .xlsm or .csv (UTF-8)",
        }
    ]

    sheet = write_sheet(tmp_path / "ok.xlsx", payroll_rows(2, prefix="CLU"))
    dead = {
        "PAYOPS_BASE_URL": "http://127.0.0.1:9",
        "PAYOPS_AUTH_URL": "http://127.0.0.1:9/auth",
        "PAYOPS_CLIENT_ID": "x",
        "PAYOPS_CLIENT_SECRET": "very-secret-value",
        "PAYOPS_RESOURCE": "urn:payments-api",
    }
    proc = payops(
        ["payouts", str(sheet), "--label", "cli-dead", "--report-dir", str(tmp_path / "r")], dead, timeout=300
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("error:")
    assert "very-secret-value" not in proc.stderr + proc.stdout


EVIL_HEADER = '=HYPERLINK("http://evil.example/h","hdr")'


def test_a_formula_in_a_column_header_is_neutralised_in_the_csv_report(
    prefect_harness, server: SandboxServer, tmp_path: Path
) -> None:
    import csv

    from tests.flows.support import HEADERS

    sheet = tmp_path / "evil.csv"
    with sheet.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([*HEADERS, EVIL_HEADER])
        writer.writerows(row + ["x"] for row in payroll_rows(2, prefix="CLH"))
    reports = tmp_path / "reports"
    paid = payops(
        ["payouts", str(sheet), "--label", "cli-evil", "--report-dir", str(reports), "--json"], server.env
    )
    assert paid.returncode == 0, paid.stderr
    line_1 = (reports / "cli-evil.csv").read_text(encoding="utf-8").splitlines()[0]
    header = next(csv.reader([line_1]))
    assert "'" + EVIL_HEADER in header and EVIL_HEADER not in header


def test_a_formula_without_a_saved_value_is_refused_with_row_and_column(
    prefect_harness, tmp_path: Path
) -> None:
    from openpyxl import Workbook

    from tests.flows.support import HEADERS

    book = Workbook()
    sheet = book.active
    sheet.title = "payouts"
    sheet.append(HEADERS)
    for row in payroll_rows(3, prefix="CLF"):
        sheet.append(row)
    amount = HEADERS.index("amount")
    sheet.cell(row=4, column=amount + 1, value="=10+5")  # openpyxl saves formulas without a value
    path = tmp_path / "formula.xlsx"
    book.save(path)
    proc = payops(["payouts", str(path), "--report-dir", str(tmp_path / "r"), "--json"], {})
    assert proc.returncode == 2
    errors = json.loads(proc.stdout)["errors"]
    assert [(e["row"], e["column"]) for e in errors] == [(4, "amount")]
    assert "formulas without a saved value" in errors[0]["message"]
