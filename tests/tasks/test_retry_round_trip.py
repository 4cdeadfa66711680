"""The retry sheet round-trips every sheet the intake accepts (docs/intake.md's header aliases and value
formats, xlsx and csv): its retry sheet, and the retry of that retry, are read back with zero invalid rows and
hold exactly the failed and refused rows, their own columns and values, fresh references.

The first retry's rows are recorded as a running run records them (`tasks.payouts.retry_rows`, the failed ones
as the poll sees them) before the report adds the refused ones: the early path gives the same sheet.

Property-style (hypothesis, derandomized so CI sees the same examples); the emulator round trip with real
payouts is tests/flows/test_retry_round_trip.py.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl import Workbook
from payops.store import migrate, open_engine
from payops.store.retries import RetryRows
from payops.tasks.intake import IntakeOptions, IntakeResult, read_payout_sheet
from payops.tasks.intake.columns import ALIASES, format_column_map, parse_column_map
from payops.tasks.payouts.retry_rows import retry_rows_of
from payops.tasks.payouts.retry_sheet import prepare_retry
from payops.tasks.reports.run_reports import resubmit_reference, write_reports
from payops.tasks.rows.outcome import RowOutcome
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.wire.references import row_reference

# Value formats of docs/intake.md ("Cell rules"): the text each is written as, and the value it means.
AMOUNTS = [
    ("1234.5", "1234.50"),
    ("1,234.50", "1234.50"),
    ("10.500", "10.50"),
    ("GH₵ 10.00", "10.00"),
    ("GHS 10", "10.00"),
    ("10 GHS", "10.00"),
    (Decimal("25.75"), "25.75"),  # a numeric cell (xlsx)
]
PHONES = ["0{n}", "0{a} {b} {c}", "+233 {a} {b} {c}", "00233{n}", "233{n}", "numeric"]
PROVIDERS = [("mtn", "mtn"), ("MTN", "mtn"), ("Airtel Tigo", "airteltigo"), ("telecel", "telecel")]
TYPES = ["", "phone", "momo", "msisdn", "Mobile Money"]
# Formula-looking text comes back as written ("=..." only in csv: in an xlsx it would be a formula).
NAMES = ["Ama Mensah", "  Kofi   Boateng ", "+Esi", "=Yaa Quaye"]
NOTES = ["March stipend", "-bonus", "@home"]
EXTRAS = ["Employee ID", "Dept"]


def _variant(alias: str, style: int) -> str:
    return [alias, alias.upper(), alias.title(), alias.replace(" ", "_"), alias.replace(" ", "-")][style]


@dataclass(frozen=True)
class Sheet:
    headers: list[str]
    rows: list[list[Any]]
    mapping: dict[str, str]
    xlsx: bool
    delimiter: str


@st.composite
def sheets(draw: st.DrawFn) -> Sheet:
    """A payout sheet with any accepted header for each field and any accepted format in each cell."""
    optional = {f: draw(st.booleans()) for f in ("reference", "destination_type", "payee_name", "note")}
    fields = ["amount", "currency", "provider", "destination", *(f for f, on in optional.items() if on)]
    fields = draw(st.permutations(fields))
    mapping: dict[str, str] = {}
    headers = []
    for field in fields:
        if field == "destination" and draw(st.booleans()):
            header = "Staff Mobile"  # no alias: named by an explicit mapping
            mapping[header] = field
        else:
            header = _variant(draw(st.sampled_from(ALIASES[field])), draw(st.integers(0, 4)))
            if field == "amount" and draw(st.booleans()):
                header += " (GHS)"
        headers.append(header)
    extras = draw(st.lists(st.sampled_from(EXTRAS), unique=True, max_size=2))
    headers += extras
    xlsx = draw(st.booleans())
    n = draw(st.integers(1, 5))
    rows = []
    for i in range(n):
        digits = f"24{i}{draw(st.integers(100000, 999999))}"  # a Ghana number: 9 digits after 233
        phone = draw(st.sampled_from(PHONES))
        if phone == "numeric" and not xlsx:
            phone = "233{n}"
        amount = draw(st.sampled_from(AMOUNTS if xlsx else AMOUNTS[:-1]))[0]
        values = {
            "reference": f"PAY-{i:03d}",
            "amount": amount,
            "currency": draw(st.sampled_from(["GHS", "ghs"])),
            "provider": draw(st.sampled_from(PROVIDERS))[0],
            "destination_type": draw(st.sampled_from(TYPES)),
            "destination": int("233" + digits)
            if phone == "numeric"
            else phone.format(n=digits, a=digits[:2], b=digits[2:5], c=digits[5:]),
            "payee_name": draw(st.sampled_from(NAMES if not xlsx else NAMES[:-1])),
            "note": draw(st.sampled_from(NOTES)),
        }
        rows.append([values[f] for f in fields] + [f"{e}-{i}" for e in extras])
    return Sheet(headers, rows, mapping, xlsx, draw(st.sampled_from([",", ";"])))


def _write(sheet: Sheet, folder: Path) -> Path:
    if sheet.xlsx:
        book = Workbook()
        ws = book.active
        ws.title = "payouts"
        ws.append(sheet.headers)
        for row in sheet.rows:
            ws.append(row)
        book.save(folder / "payroll.xlsx")
        return folder / "payroll.xlsx"
    out = io.StringIO()
    csv.writer(out, delimiter=sheet.delimiter, lineterminator="\r\n").writerows([sheet.headers, *sheet.rows])
    (folder / "payroll.csv").write_text(out.getvalue(), encoding="utf-8")
    return folder / "payroll.csv"


def _paid_once(
    intake: IntakeResult, label: str, failing: set[int], folder: Path, mapping: str
) -> dict[int, RowOutcome]:
    """The reports of a run of ``intake`` whose rows at the positions ``failing`` failed or were refused (the
    others delivered), as the flow writes them; the outcomes."""
    outcomes = {}
    for i, row in enumerate(intake.rows):
        reference = row.reference or row_reference(label, row.row)
        o = RowOutcome(row.row, reference=reference, submission="accepted", status="delivered")
        if i in failing:
            if i % 3 == 2:
                o.submission, o.status, o.error_code = "refused", None, "transaction_limit_exceeded"
            else:
                o.status = "failed" if i % 3 == 0 else "refunded"
        outcomes[row.row] = o
    summary: dict[str, Any] = {"label": label, "outcome": "completed", "errors": []}
    if mapping:
        summary["column_map"] = mapping
    write_reports(
        str(folder), label, intake.columns, intake.table, outcomes, summary, intake.mapped.get("reference")
    )
    return outcomes


def _comparable(rows: list[PayoutRow]) -> list[tuple[Any, ...]]:
    return [
        (r.amount, r.currency, r.provider, r.destination_type, r.destination, r.payee_name, r.note, r.extra)
        for r in rows
    ]


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sheets(), st.data())
def test_every_accepted_sheet_gives_retry_sheets_the_intake_accepts(
    sheet: Sheet, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        options = IntakeOptions(column_map=sheet.mapping)
        first = read_payout_sheet(str(_write(sheet, folder)), options)
        assert first.errors == [], first.errors
        assert first.ignored == [h for h in sheet.headers if h in EXTRAS]
        failing = data.draw(st.sets(st.sampled_from(range(len(first.rows))), min_size=1))
        mapping = format_column_map(sheet.mapping)
        outcomes = _paid_once(first, "payroll", failing, folder, mapping)
        engine = open_engine(f"sqlite:///{folder / 'payops.sqlite3'}")
        migrate(engine)
        store = RetryRows(engine)
        failed = {row: o for row, o in outcomes.items() if o.status in {"failed", "refunded"}}
        polled = retry_rows_of(first.columns, first.table, failed, first.mapped.get("reference"), mapping)
        store.record("payroll", polled)  # as the run records them while it polls

        expected = [first.rows[i] for i in sorted(failing)]
        references = [r.reference or row_reference("payroll", r.row) for r in expected]
        label = "payroll"
        for attempt in (1, 2):  # the retry, then the retry of the retry (everything fails again)
            retry = prepare_retry(str(folder), label, store)
            assert retry.label == f"payroll-retry{attempt}" and retry.rows == len(expected)
            assert parse_column_map(retry.column_map) == sheet.mapping
            mapped = IntakeOptions(column_map=parse_column_map(retry.column_map))
            read = read_payout_sheet(retry.source, mapped)
            assert read.errors == [] and read.rows_invalid == 0, read.errors
            references = [resubmit_reference(r) for r in references]
            # rows in the order they were recorded (failed as polled, then refused from the report)
            got = dict(zip([r.reference for r in read.rows], _comparable(read.rows), strict=True))
            assert len(got) == len(read.rows) == len(references)
            assert got == dict(zip(references, _comparable(expected), strict=True))
            own_reference = first.mapped.get("reference")
            assert read.mapped.get("reference") == (own_reference or "reference")
            assert [c for c in read.columns if c != "reference" or own_reference] == first.columns
            label = retry.label
            _paid_once(read, label, set(range(len(read.rows))), folder, mapping)
            summary = json.loads((folder / f"{label}.json").read_text())
            assert summary["label"] == label
