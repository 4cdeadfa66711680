"""A real HR payroll export pays without editing (issue 46): `payops check` reads its headers and takes the
currency from "Net Pay (GHS)"; a sheet whose amount header names no currency is paid with `--currency`,
which travels through the payops server's API to the run; a header contradicting it is refused naming both.

The CLI runs as a person runs it (a subprocess), through the server of tests/deployments/test_front_door.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.deployments.browser_harness import payouts_at
from tests.deployments.console_harness import payops
from tests.deployments.hr_export import hr_export, hr_rows, hr_total
from tests.deployments.test_front_door import api, bare_env, server  # noqa: F401 - the server fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_an_hr_export_is_checked_and_paid_through_the_server_with_its_currency(
    server: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = bare_env(server, "olu", tmp_path / "olu")
    rows = hr_rows(4, prefix="HR", amounts_as_text=True)
    sheet = hr_export(tmp_path / "hr-export.xlsx", rows)
    checked = payops(env, "check", str(sheet), "--report-dir", str(tmp_path / "r"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "currency GHS (from the header 'Net Pay (GHS)')" in checked.stdout
    assert "ignored columns: Employee ID" in checked.stdout
    as_json = json.loads(
        payops(env, "check", str(sheet), "--json", "--report-dir", str(tmp_path / "r")).stdout
    )
    assert (as_json["outcome"], as_json["rows_valid"]) == ("valid", 4)
    assert as_json["amount_total"] == str(hr_total(rows))
    assert (as_json["currency"], as_json["currency_header"]) == ("GHS", "Net Pay (GHS)")

    contradicted = payops(env, "check", str(sheet), "--currency", "XOF", "--report-dir", str(tmp_path / "r"))
    assert contradicted.returncode == 2
    assert "'Net Pay (GHS)' says the currency is GHS, but XOF was chosen for the sheet" in contradicted.stdout

    plain = hr_export(tmp_path / "hr-plain.xlsx", hr_rows(4, prefix="HRP"), amount_header="Net Pay")
    missing = payops(env, "check", str(plain), "--report-dir", str(tmp_path / "r"))
    assert missing.returncode == 2 and "missing required column: currency" in missing.stdout
    with api(server, "olu") as olu:  # the API's check takes the currency as a form field
        answer = olu.post(
            "/sheets/check", files={"sheet": ("p.xlsx", plain.read_bytes())}, data={"currency": "GHS"}
        )
    assert answer.status_code == 200 and answer.json()["outcome"] == "valid", answer.text
    assert answer.json()["currency"] == "GHS" and "currency_header" not in answer.json()

    paid = payops(env, "payouts", str(plain), "--currency", "ghs", "--dry-run", "--json")
    assert paid.returncode == 0, paid.stderr[-2000:]
    summary = json.loads(paid.stdout)
    assert (summary["outcome"], summary["rows_valid"], summary["currency"]) == ("dry_run", 4, "GHS")
    assert summary["started_by"] == "olu" and "currency_header" not in summary
    bad = payops(env, "payouts", str(plain), "--currency", "cedi", "--dry-run")
    assert bad.returncode == 2 and "--currency must be a three-letter currency code" in bad.stderr

    # Then paid as it is: `payops payouts` on the export, nothing mapped, nothing edited.
    before = payouts_at(server["emulator"])
    done = payops(env, "payouts", str(sheet), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["currency"], summary["started_by"]) == ("completed", "GHS", "olu")
    assert summary["payouts_by_status"] == {"delivered": 4}
    assert summary["amount_total"] == str(hr_total(rows))
    assert payouts_at(server["emulator"]) == before + 4

    # The run is called "hr-export" everywhere people see it (its label is the sheet's fingerprint): the
    # reconciliation takes that name as `payops runs` shows it (issue 47).
    listed = json.loads(payops(env, "runs", "--json").stdout)
    (run,) = [r for r in listed if r["label"] == summary["label"]]
    assert run["name"] == "hr-export" and summary["label"].startswith("sheet-")
    checked = payops(env, "reconcile", "--run", "hr-export", "--json")
    assert checked.returncode == 0, checked.stderr[-2000:]
    result = json.loads(checked.stdout)
    assert (result["label"], result["rows"], result["differences"]) == (summary["label"], 4, 0)

    # A day closed from the CLI is a person's close in the history, not the schedule's (issue 47).
    closed = payops(env, "reconcile", "--json")
    assert closed.returncode == 0, closed.stderr[-2000:]
    day = json.loads(closed.stdout)
    assert day["scope"] == "day"
    history = json.loads(payops(env, "reconcile", "history", "--json").stdout)
    (entry,) = [c for c in history if c["id"] == day["check_id"]]
    assert (entry["scope"], entry["trigger"]) == ("day", "cli")
