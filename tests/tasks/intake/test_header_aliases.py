"""Header aliases of real payroll and marketplace exports (issue 46), one case per alias, and the docs' table
of accepted headers, which must be `ALIASES` exactly."""

from __future__ import annotations

import pytest
from payops.tasks.intake import IntakeError
from payops.tasks.intake.columns import ALIASES, REQUIRED, field_for_header, map_columns

from tests.docs.markdown import read

#: the HR export of issue 46, one header per field it has (Employee ID is an extra column)
TYPICAL = {
    "reference": "Payment Reference",
    "amount": "Net Pay (GHS)",
    "provider": "Bank/Network",
    "destination": "Phone Number",
    "payee_name": "Full Name",
}
EXTRA = "Employee ID"
CASES = [(name, alias) for name, aliases in ALIASES.items() for alias in aliases]


@pytest.mark.parametrize(("name", "alias"), CASES, ids=[f"{n}:{a}" for n, a in CASES])
def test_each_alias_names_its_field_in_a_typical_hr_sheet_without_colliding(name: str, alias: str) -> None:
    for variant in (alias, alias.upper(), alias.title(), f" {alias.replace(' ', '_')} ", f"{alias} (x)"):
        assert field_for_header(variant) == name, variant
    headers = {**TYPICAL, name: alias.title()}
    columns = [EXTRA, *headers.values()]
    if name != "currency":
        columns.append("Currency")
    cmap = map_columns(columns)
    assert cmap.headers(columns)[name] == alias.title()
    assert cmap.ignored(columns) == [EXTRA]


@pytest.mark.parametrize("header", ["Employee ID", "Staff ID", "Employee No", "Emp ID"])
def test_an_employee_id_is_never_a_reference(header: str) -> None:
    assert field_for_header(header) is None


def test_spaces_around_a_slash_do_not_matter() -> None:
    assert field_for_header("Bank / Network") == field_for_header("bank/network") == "provider"
    assert field_for_header("Account / Phone Number") == "destination"


def test_the_docs_table_of_accepted_headers_is_the_aliases() -> None:
    doc = read("docs/intake.md")
    start = doc.index("| field | required | accepted headers |")
    lines = doc[start:].split("\n\n", 1)[0].splitlines()[2:]
    table = {}
    for line in lines:
        name, required, aliases = (cell.strip() for cell in line.strip("|").split("|"))
        table[name] = (required, [a.strip() for a in aliases.split(",")])
    assert {f: aliases for f, (_, aliases) in table.items()} == {f: list(a) for f, a in ALIASES.items()}
    assert [f for f, (required, _) in table.items() if required.startswith("yes")] == list(REQUIRED)


def test_two_aliases_of_one_field_still_refuse_the_sheet() -> None:
    with pytest.raises(IntakeError, match="'Net Pay' and 'Salary' both mean amount"):
        map_columns(["Net Pay", "Salary", "Currency", "Network", "Phone"])
