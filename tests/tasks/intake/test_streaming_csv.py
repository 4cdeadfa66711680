"""A csv read in chunks into a spill file yields what the same csv read whole yields: the valid rows, every
error and warning (repeats across chunk borders included), the batches (references and keys), the hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.intake.streaming import stream_csv
from payops.tasks.payouts.batching import batch_count, build_batch
from payops.tasks.payouts.spill import RowSpill
from payops.tasks.rows.outcome import RowOutcome

HEADER = "Payment Reference,Full Name,Amount,Currency,Provider,Destination type,Staff Mobile,Department\n"
LINES = [
    "PAY-001,Ama Mensah,120.50,GHS,mtn,msisdn,+233 24 123 4567,Ops\n",
    'PAY-002,Kofi Boateng,"1,200.00",GHS,mtn,msisdn,024 765 4321,Sales\n',
    "pay-001,Yaw Asante,80.00,GHS,mtn,msisdn,0241112223,Ops\n",  # PAY-001 again, other case
    "\n",
    "PAY-004,Esi Owusu,abc,GHS,mtn,msisdn,0245556667,Ops\n",  # bad amount
    'PAY-005,Kwame Nkrumah,45.10,GHS,mtn,msisdn,0248889990,"Finance, ""North"""\n',
    "PAY-006,Akua Addo,45.10,GHS,mtn,msisdn,0248889990,Finance\n",  # same payee and amount as PAY-005
    ",Adwoa Poku,60.25,GHS,vodafone,msisdn,0201234567,\n",  # no reference: the label's
    "PAY-008,,61.00,GHS,mtn,msisdn,0247778889,\n",
    "PAY-002,Kofi Boateng,75.00,GHS,mtn,msisdn,0241010101,Sales\n",  # PAY-002 again
    "PAY-010,Abena Darko,99.99,GHS,mtn,card,4111111111111111,\n",  # a card number the rules refuse
    'PAY-011,"Efua\nSutherland",10.00,GHS,mtn,msisdn,0241212121,Arts\n',  # a name over two lines
    "PAY-012,Kojo Antwi,45.10,GHS,mtn,msisdn,0248889990,Music\n",  # the PAY-005 payee a third time
]


MAPPED = IntakeOptions(column_map={"Staff Mobile": "destination"})  # a header payops does not know


def _csv(tmp_path: Path, lines: list[str], name: str = "payroll.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 5, 50])
def test_chunks_find_what_the_whole_sheet_finds(tmp_path: Path, chunk_rows: int) -> None:
    path = _csv(tmp_path, LINES)
    whole = read_payout_sheet(path, MAPPED)
    assert whole.errors and whole.warnings  # the sheet does exercise both
    with RowSpill(tmp_path / "spill.sqlite3") as spill:
        streamed = stream_csv(path, spill, MAPPED, chunk_rows=chunk_rows)
        assert list(spill.rows()) == whole.rows
        assert list(spill.issues("error")) == whole.errors
        assert list(spill.issues("warning")) == whole.warnings
        assert streamed.rows_total == whole.rows_total
        assert streamed.summary(spill)["rows_invalid"] == whole.rows_invalid
        assert streamed.columns == whole.columns
        assert streamed.mapped == whole.mapped and streamed.ignored == whole.ignored
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert streamed.content_sha256 == whole.content_sha256 == digest


def test_batches_from_the_spill_are_the_batches_of_the_list(tmp_path: Path) -> None:
    lines = [
        f"R-{i:04d},Name {i},{10 + i % 90}.{i % 100:02d},GHS,mtn,msisdn,02400{i:05d},\n" for i in range(250)
    ]
    path = _csv(tmp_path, lines)
    whole = read_payout_sheet(path, MAPPED)
    with RowSpill(tmp_path / "spill.sqlite3") as spill:
        stream_csv(path, spill, MAPPED, chunk_rows=64)
        assert spill.batch_count() == batch_count(whole.rows) == 3
        for index in range(3):
            assert spill.batch("payroll-2026-05", index) == build_batch(whole.rows, "payroll-2026-05", index)
        with pytest.raises(IndexError):
            spill.batch("payroll-2026-05", 3)


def test_outcomes_are_kept_by_row_and_replaced_by_a_later_answer(tmp_path: Path) -> None:
    with RowSpill(tmp_path / "spill.sqlite3") as spill:
        first = [RowOutcome(3, "R-1", "B-0", "accepted", "pending"), RowOutcome(2, submission="invalid")]
        spill.record(first)
        spill.record([RowOutcome(3, "R-1", "B-0", "accepted", "delivered", fee="1.20")])
        assert list(spill.outcomes(chunk=1)) == [
            RowOutcome(2, submission="invalid"),
            RowOutcome(3, "R-1", "B-0", "accepted", "delivered", fee="1.20"),
        ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"\xff\xfeP\x00", "UTF-16"),
        (b"PK\x03\x04rest", "Excel workbook"),
        (HEADER.encode() + b"PAY-1,A\x00,1.00,GHS,mtn,msisdn,0241234567,\n", "NUL"),
        (HEADER.encode() + b"PAY-1,\xe9t\xe9,1.00,GHS,mtn,msisdn,0241234567,\n", "not UTF-8"),
        (HEADER.encode() + b"\n\n", "no data rows"),
        (HEADER.encode() + b'PAY-1,"' + b"x" * 70_000 + b'",1.00,GHS,mtn,msisdn,0241234567,\n', "line 2"),
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with RowSpill(tmp_path / "spill.sqlite3") as spill, pytest.raises(IntakeError, match=message):
        stream_csv(path, spill, MAPPED, chunk_rows=2)


def test_more_rows_than_allowed_are_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, [f"R-{i},N,1.00,GHS,mtn,msisdn,02400{i:05d},\n" for i in range(30)])
    with RowSpill(tmp_path / "spill.sqlite3") as spill, pytest.raises(IntakeError, match="more than 20"):
        stream_csv(path, spill, MAPPED, chunk_rows=10, max_rows=20)
