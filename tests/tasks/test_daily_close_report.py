"""The close's transactions, read a page at a time, and its report as finance opens it."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from openpyxl import load_workbook
from payops.connectors.payments import Transaction
from payops.tasks.ledger.daily_close import (
    OUTSIDE,
    CloseData,
    ReadTransactions,
    close_day,
    write_close_reports,
)

from tests.connectors.payments_samples import TRANSACTION

PARENT = {"type": "payout", "reference": "pay-r1"}
DELIVERED = {**TRANSACTION, "status": "delivered", "completedAt": "2026-01-01T10:00:05.250Z"}


def tx(**fields: object) -> Transaction:
    return Transaction.model_validate({**DELIVERED, **fields})


def read_pages(*pages: list[Transaction], labels: dict[str, str]) -> tuple[ReadTransactions, list[set[str]]]:
    looked_up: list[set[str]] = []

    def labels_of(references: object) -> dict[str, str]:
        refs = set(references)  # type: ignore[call-overload]
        looked_up.append(refs)
        return {r: labels[r] for r in refs if r in labels}

    read = ReadTransactions(labels_of)
    for page in pages:
        read.add(page)
    read.flush()
    return read, looked_up


def test_pages_become_one_frame_a_transaction_listed_twice_counts_once() -> None:
    first = [
        tx(id="tx-1", reference="pay-r1"),
        tx(id="tx-2", reference="dash-1", fee=None, payerAmount=None, completedAt="2026-01-01T10:00:05.250"),
    ]  # a time without a zone is UTC
    second = [
        tx(id="tx-2", reference="dash-1"),  # the list moved between the two pages
        tx(
            id="tx-3",
            reference="rev-1",
            direction="in",
            parent=PARENT,
            completedAt="2026-01-01T10:00:00+01:00",
        ),
    ]
    read, looked_up = read_pages(first, second, labels={"pay-r1": "payroll-nov"})
    frame = read.frame()
    assert list(frame["id"]) == ["tx-1", "tx-2", "tx-3"]
    assert list(frame["amount_c"]) == [1250, 1250, 1250]
    assert frame["fee_c"].isna().tolist() == [False, True, False]
    assert list(frame["effect_c"]) == [-1300, -1250, 1250]
    assert list(frame["slug"]) == ["pay", None, None]
    assert frame["completed_at"].iloc[0] == datetime(2026, 1, 1, 10, 0, 5, 250000, tzinfo=UTC)
    assert frame["completed_at"].iloc[1] == datetime(2026, 1, 1, 10, 0, 5, 250000, tzinfo=UTC)
    assert frame["completed_at"].iloc[2] == datetime(2026, 1, 1, 9, 0, tzinfo=UTC)  # from +01:00
    assert read.labels == {"pay-r1": "payroll-nov"}
    assert set().union(*looked_up) == {"pay-r1", "dash-1", "rev-1"}


def test_the_report_has_numbers_and_excel_datetimes(tmp_path: Path) -> None:
    read, _ = read_pages(
        [
            tx(id="tx-1", reference="pay-r1"),
            tx(id="tx-2", reference="dash-1", fee=None, payerAmount=None, status="pending", completedAt=None),
            tx(id="tx-3", reference="rev-1", direction="in", parent=PARENT),
        ],
        labels={"pay-r1": "payroll-nov"},
    )
    as_of = datetime(2026, 1, 2, tzinfo=UTC)
    data = CloseData(as_of, datetime(2026, 1, 1, tzinfo=UTC), {}, read, [], [], Counter())
    result = close_day("2026-01-01", None, [], data, read.labels, ["payroll-nov"])
    paths = write_close_reports(str(tmp_path), "close", result, result.summary())
    sheet = load_workbook(paths["xlsx"])["transactions"]
    head = [c.value for c in sheet[1]]
    rows = [dict(zip(head, (c.value for c in row), strict=True)) for row in sheet.iter_rows(min_row=2)]
    assert [r["run"] for r in rows] == ["payroll-nov", OUTSIDE, "payroll-nov"]
    assert [r["amount"] for r in rows] == [12.5, 12.5, 12.5]
    assert [r["fee"] for r in rows] == [0.5, None, 0.5]
    assert [r["wallet effect"] for r in rows] == [-13, 0, 12.5]
    assert rows[0]["completed at (UTC)"] == datetime(2026, 1, 1, 10, 0, 5, 250000)
    assert rows[0]["created at (UTC)"] == datetime(2026, 1, 1, 10, 0)
    assert rows[1]["completed at (UTC)"] is None
    assert rows[0]["parent"] is None and rows[2]["parent"] == "pay-r1"
    assert sheet.cell(2, head.index("amount") + 1).number_format == "#,##0.00"
    assert sheet.cell(2, head.index("created at (UTC)") + 1).number_format == "yyyy-mm-dd hh:mm:ss"
    assert sum(Decimal(str(r["wallet effect"])) for r in rows) == Decimal("-0.50")
