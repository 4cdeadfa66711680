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
    assert page.status_code == 422 and "missing required column: destination" in page.text
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


HR_HEADERS = ["Employee ID", "Full Name", "Phone Number", "Net Pay", "Bank/Network", "Type"]


def hr_sheet(path: Path) -> Path:
    """An HR export: no currency column, an amount header naming none, and a "Type" column that is the
    contract type (payops guesses it is the destination type)."""
    book = Workbook()
    ws = book.active
    ws.append(HR_HEADERS)
    for i, name in enumerate(["Ama Mensah", "Kofi Boateng"]):
        ws.append([f"E-{i}", name, f"+233 24 123 45{60 + i}", f"{1200 + i}.50", "MTN", "Permanent"])
    book.save(path)
    return path


def selected(page: str, select_id: str) -> str | None:
    """The value pre-selected in the select ``select_id`` of the page."""
    block = re.search(rf'<select [^>]*id="{select_id}">(.*?)</select>', page, re.S).group(1)
    found = re.search(r'<option value="([^"]*)" selected>', block)
    return found.group(1) if found else None


def test_every_guess_is_shown_a_wrong_one_corrected_and_the_currency_chosen(
    tmp_path: Path,
    launcher: FakeLauncher,  # noqa: F811
) -> None:
    client, token = operator(tmp_path, launcher)
    page = upload(client, token, hr_sheet(tmp_path / "hr.xlsx"))
    assert page.status_code == 422 and "missing required column: currency" in page.text
    guesses = {f: selected(page.text, f"map-{f}") for f in ("amount", "provider", "destination")}
    assert guesses == {"amount": "Net Pay", "provider": "Bank/Network", "destination": "Phone Number"}
    assert selected(page.text, "map-payee_name") == "Full Name"
    assert selected(page.text, "map-destination_type") == "Type"  # the wrong guess
    assert selected(page.text, "map-reference") == ""  # Employee ID is no reference
    assert selected(page.text, "sheet-currency") == "" and '<option value="GHS">GHS</option>' in page.text
    mapping_form = page.text.split('id="mapping-form"')[1].split("</form>")[0]
    mapping_form = re.sub(r'="[^"]*"', '=""', mapping_form)  # the words shown, not the random CSRF token
    assert "--" not in mapping_form and "docs/" not in mapping_form  # no CLI flags, no repository paths

    upload_id = re.search(r'action="/uploads/([^/]+)/columns"', page.text).group(1)
    form = {
        "csrf_token": token_of(page.text),
        **{f"map_{f}": h or "" for f, h in guesses.items()},
        "map_payee_name": "Full Name",
        "map_destination_type": "",  # "Type" is the contract type, not the destination type
        "map_reference": "",
        "map_currency": "",
        "map_note": "",
        "currency": "GHS",
    }
    page = client.post(f"/uploads/{upload_id}/columns", data=form)
    assert page.status_code == 200 and 'id="submit"' in page.text, page.text
    assert "currency GHS (chosen for the sheet)" in page.text and "Ama Mensah" in page.text
    assert (
        selected(page.text, "map-destination_type") == "" and selected(page.text, "sheet-currency") == "GHS"
    )
    r = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token_of(page.text)})
    assert r.status_code == 303
    ((params, _name),) = launcher.started
    assert (params.column_map, params.currency) == ("Type=none", "GHS")


def test_a_currency_named_by_the_amount_header_is_offered_as_the_sheets(
    tmp_path: Path,
    launcher: FakeLauncher,  # noqa: F811
) -> None:
    client, token = operator(tmp_path, launcher)
    path = hr_sheet(tmp_path / "hr.xlsx")
    book = __import__("openpyxl").load_workbook(path)
    book.active["D1"] = "Net Pay (GHS)"
    book.active["F1"] = "Contract"
    book.save(path)
    page = upload(client, token, path)
    assert page.status_code == 200 and 'id="submit"' in page.text
    assert "currency GHS (from the header &#39;Net Pay (GHS)&#39;)" in page.text
    assert selected(page.text, "sheet-currency") == "" and "from the header: GHS" in page.text
