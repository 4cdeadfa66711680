"""A payroll paid lately is named before it is approved again (issue 47): "re-uploading a payroll already paid
gives no warning". The console's preview and `payops check` name the earlier run (its shown name and label,
when it was sent) and what paying again would do: the same sheet, under any file name, only replays (same
label: nothing paid twice); the same payees and amounts under another label would pay them a second time.

The earlier run is recorded as the flow records a run just before it sends
(`tasks.ledger.run_reconciliation.record_approved_payouts`, with the rows as the flow reads the sheet)."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
from pathlib import Path

from payops.store.settings import PayopsSettings
from payops.tasks.intake import IntakeOptions, read_payout_sheet
from payops.tasks.ledger.run_reconciliation import record_approved_payouts
from payops.tasks.payouts.sheet_check import run_label, sheet_fingerprint

from tests.deployments.console_harness import payops
from tests.deployments.hr_export import hr_export, hr_rows
from tests.deployments.test_console_security import (  # noqa: F401 - fixtures: the launcher, the approval key
    FakeLauncher,
    approval_key,
    launcher,
    operator,
    upload,
)


def paid(sheet: Path, database_url: str, name: str) -> str:
    """Record ``sheet`` as paid by a run shown as ``name`` (now), as the flow does; returns its label."""
    intake = read_payout_sheet(str(sheet), IntakeOptions())
    label = run_label(None, intake)
    settings = PayopsSettings(database_url=database_url)
    asyncio.run(
        record_approved_payouts(settings, label, intake.rows, {}, sheet=sheet_fingerprint(intake), name=name)
    )
    return label


def test_a_paid_payroll_uploaded_again_or_its_rows_under_another_label_are_named_before_approval(
    tmp_path: Path,
    launcher: FakeLauncher,  # noqa: F811
) -> None:
    client, token = operator(tmp_path, launcher)
    database_url = (
        f"sqlite:///{tmp_path / 'payops.sqlite3'}"  # the console's (test_console_security.settings)
    )
    rows = hr_rows(4, prefix="NOV")
    november = hr_export(tmp_path / "november-payroll.xlsx", rows)
    label = paid(november, database_url, "november-payroll")
    earlier = f"run november-payroll (label {label}) sent this same sheet (4 rows) on "

    again = upload(client, token, november)  # the very file, uploaded again
    assert again.status_code == 200 and 'id="paid-before"' in again.text
    assert "R" + earlier[1:] in again.text and "only replays it: nothing is paid twice" in again.text
    assert 'id="paid-before-ack"' not in again.text and 'id="submit"' in again.text

    copy = tmp_path / "payroll-final-v2.xlsx"  # the same sheet under another file name
    copy.write_bytes(november.read_bytes())
    renamed = upload(client, token, copy)
    assert renamed.status_code == 200 and "R" + earlier[1:] in renamed.text
    assert "only replays it" in renamed.text

    # The same payees and amounts in a sheet of its own (its references differ): another label, so paying it
    # pays them a second time, and the approver will have to acknowledge it.
    december = hr_export(tmp_path / "december-payroll.xlsx", hr_rows(4, prefix="DEC"))
    second = upload(client, token, december)
    assert second.status_code == 200
    assert (
        f"Run november-payroll (label {label}) sent 4 of this sheet's 4 rows (same payee number, amount and "
        "currency) on " in html.unescape(second.text)
    )
    assert "so paying would pay them a second time" in second.text
    assert re.search(r'id="paid-before-ack">4 rows would be paid a second time', second.text)

    fresh = upload(client, token, hr_export(tmp_path / "new-staff.xlsx", hr_rows(6, prefix="NEW")[4:]))
    assert fresh.status_code == 200 and 'id="paid-before"' not in fresh.text  # payees never paid

    # `payops check` reads the same payops database and says the same.
    env = {**os.environ, "PAYOPS_DATABASE_URL": database_url, "PAYOPS_HOME": str(tmp_path / "home")}
    checked = payops(env, "check", str(copy), "--report-dir", str(tmp_path / "r"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"  paid before: {earlier}" in checked.stdout and "only replays it" in checked.stdout
    checked = payops(env, "check", str(december), "--report-dir", str(tmp_path / "r"), "--json")
    summary = json.loads(checked.stdout)
    ((run,),) = [summary["paid_before"]]
    assert (run["label"], run["name"], run["matched"], run["same_label"]) == (
        label,
        "november-payroll",
        4,
        False,
    )
    assert summary["paid_twice_rows"] == 4
    checked = payops(env, "check", str(december), "--report-dir", str(tmp_path / "r"))
    assert "  paying it would pay 4 rows a second time: the approver must acknowledge it" in checked.stdout
