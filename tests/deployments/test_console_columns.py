"""The console's column-mapping step (issue 30): a sheet whose headers leave a required field, or the payee
name, without a column gets a form listing its headers; the operator's choice is checked at once, kept with
the upload, and passed to the run (it reads the sheet the same way; the mapping is in its fingerprint)."""

from __future__ import annotations

import re
from pathlib import Path

from openpyxl import Workbook

from tests.deployments.test_console_security import (  # noqa: F401 - fixtures: the launcher, the approval key
    FakeLauncher,
    approval_key,
    launcher,
    operator,
    upload,
)

HEADERS = ["Payment Reference", "Staff Member", "Amount", "Currency", "Network", "Type", "Handset"]


def sheet(path: Path) -> Path:
    book = Workbook()
    ws = book.active
    ws.title = "payouts"
    ws.append(HEADERS)
    for i in range(3):
        ws.append(
            [
                f"MAP-{i}",
                f"Ama Mensah {i}",
                f"{10 + i}.50",
                "GHS",
                "mtn",
                "msisdn",
                f"+233 24 555 {1000 + i:04d}",
            ]
        )
    book.save(path)
    return path


def token_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_an_unknown_destination_and_name_header_are_mapped_in_the_console(
    tmp_path: Path,
    launcher: FakeLauncher,  # noqa: F811
) -> None:
    client, token = operator(tmp_path, launcher)
    page = upload(client, token, sheet(tmp_path / "hr-export.xlsx"))
    assert page.status_code == 422 and "missing required column(s): destination" in page.text
    assert 'id="mapping-form"' in page.text and 'id="submit"' not in page.text
    for header in HEADERS:
        assert f'<option value="{header}"' in page.text
    upload_id = re.search(r'action="/uploads/([^/]+)/columns"', page.text).group(1)
    form = {"csrf_token": token_of(page.text), "map_destination": "Handset"}
    page = client.post(f"/uploads/{upload_id}/columns", data=form)
    # the destination is found now; the payee name still has no column: the step offers it
    assert page.status_code == 200 and 'id="submit"' in page.text and 'id="no-name-column"' in page.text
    assert 'id="mapping-form"' in page.text
    form = {"csrf_token": token_of(page.text), "map_destination": "Handset", "map_payee_name": "Staff Member"}
    page = client.post(f"/uploads/{upload_id}/columns", data=form)
    assert page.status_code == 200 and 'id="no-name-column"' not in page.text
    assert "Ama Mensah 0" in page.text  # the sample shows the payee names now
    r = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token_of(page.text)})
    assert r.status_code == 303
    ((params, _name),) = launcher.started
    assert params.column_map == "Handset=destination; Staff Member=payee_name"
    bad = {"csrf_token": token_of(page.text), "map_destination": "No Such Header"}
    refused = client.post(f"/uploads/{upload_id}/columns", data=bad)
    assert refused.status_code == 422 and "not a header of this sheet" in refused.text
