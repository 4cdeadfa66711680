"""A csv too large to hold, paid a part at a time from a spill file (`flows.payout_parts`), against the
emulator: the same outcomes, summary and reports as the same sheet held in memory (through the same send and
poll path: one part), and a re-run that replays.

The size at which a csv streams is a payops setting (PAYOPS_STREAM_CSV_OVER_BYTES); these tests set it to 0
(every csv streams) and make parts of 300 rows, so a 700-row sheet crosses three parts.
"""

from __future__ import annotations

import asyncio
import csv
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.flows import payout_parts
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.support import HEADERS, emulator_stats, payroll_rows, write_csv

pytestmark = pytest.mark.e2e

SPECIALS = {5: "0001", 6: "0002", 7: "0003", 640: "0002"}  # failed at the service, in review, failed
INVALID = {3: ("amount", "-4.00"), 500: ("destination", "12")}  # refused by validation (skipped)


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(payout_parts, "PART_ROWS", 300)
    return server


def payroll_csv(path: Path, prefix: str, n: int = 700) -> Path:
    rows = payroll_rows(n, prefix=prefix, specials=SPECIALS)
    for i, (column, value) in INVALID.items():
        if i < n:
            rows[i][HEADERS.index(column)] = value
    for i, row in enumerate(rows):
        row[1] = f"Ama Mensah {i}"
    return write_csv(path, rows)


def pay(sheet: Path, label: str, reports: Path) -> dict:
    params = PayoutRunParams(
        source=str(sheet),
        label=label,
        report_dir=str(reports),
        on_invalid_rows="skip",
        poll_deadline_s=120,
        settle_window_s=2,
        check_names=False,
    )
    return run_summary(asyncio.run(payout_spreadsheet(params, return_state=True))).as_json()


def report_rows(summary: dict, prefix: str, label: str) -> list[list[str]]:
    """The csv report without what differs by run: the sheet's reference prefix, the label, the times."""
    with open(summary["report_files"]["csv"], newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    timed = rows[0].index("Completed at (UTC)")
    return [
        [c.replace(f"{prefix}-", "X-").replace(label, "LABEL") for k, c in enumerate(r) if k != timed]
        for r in rows
    ]


COMPARED = (
    "outcome",
    "rows_total",
    "rows_valid",
    "rows_invalid",
    "batches",
    "payouts_by_status",
    "refused_items",
    "amount_total",
    "fee_total",
)


def test_a_spilled_run_pays_reports_and_replays_as_a_held_one(
    prefect_harness, env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.flows import payouts

    went: list[tuple[str, str]] = []  # (the rows' kind, the phase) of each run: one send and poll path

    def spy(phase: str, real):
        async def spied(run, rows, *args, **kwargs):
            went.append((type(rows).__name__, phase))
            return await real(run, rows, *args, **kwargs)

        return spied

    monkeypatch.setattr(payouts, "send_parts_of", spy("send", payouts.send_parts_of))
    monkeypatch.setattr(payouts, "poll_parts_of", spy("poll", payouts.poll_parts_of))
    monkeypatch.setenv("PAYOPS_STREAM_CSV_OVER_BYTES", str(10**9))  # held in memory
    held = pay(payroll_csv(tmp_path / "held.csv", "H"), "held-700", tmp_path / "reports")
    monkeypatch.setenv("PAYOPS_STREAM_CSV_OVER_BYTES", "0")  # every csv through the spill
    before = emulator_stats(env.base_url)["payouts"]
    sheet = payroll_csv(tmp_path / "spilled.csv", "S")
    spilled = pay(sheet, "spilled-700", tmp_path / "reports")

    assert spilled["outcome"] == "completed" and spilled["rows_valid"] == 698
    assert emulator_stats(env.base_url)["payouts"] - before == 698
    assert {k: spilled[k] for k in COMPARED} == {k: held[k] for k in COMPARED}
    assert spilled["payouts_by_status"] == {"delivered": 695, "failed": 3}
    assert spilled["batches"] == 7 and spilled["api_calls"]["POST /v1/payout-batches"] == 7
    assert spilled["parts"] == 3 and held["parts"] == 1  # a sheet held whole is one part
    assert went == [
        ("HeldRows", "send"),
        ("HeldRows", "poll"),
        ("SpilledRun", "send"),
        ("SpilledRun", "poll"),
    ]
    assert Counter(a["kind"] for a in spilled["attention_rows"]) == Counter(
        a["kind"] for a in held["attention_rows"]
    )
    assert report_rows(spilled, "S", "spilled-700") == report_rows(held, "H", "held-700")
    assert spilled["reconciliation"]["status"] == held["reconciliation"]["status"]
    assert spilled["reconciliation"]["rows"] == 698 - spilled["refused_items"]

    again = pay(sheet, "spilled-700", tmp_path / "reports")  # the same label: every batch replays
    assert again["outcome"] == "completed" and again["replayed_payouts"] == 698
    assert emulator_stats(env.base_url)["payouts"] - before == 698
    assert report_rows(again, "S", "spilled-700") == report_rows(spilled, "S", "spilled-700")


def test_a_spilled_run_shows_approvers_every_row_with_its_name_check(
    prefect_harness, env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-flight hands its fees and name checks to the spill part by part; the approval page still
    holds every row with its verdict, its fingerprint covers every row, and the approved run pays them."""
    from payops.store.approval_requests import ApprovalRequests
    from payops.tasks.payouts import preflight

    from tests.flows.approval_support import decide_as, key_pair, payops_db, run_paused

    monkeypatch.setenv("PAYOPS_STREAM_CSV_OVER_BYTES", "0")
    key_pair()  # in the session's payops home, where the flows find its public half
    monkeypatch.setattr(preflight, "PART_ROWS", 250)
    before = emulator_stats(env.base_url)["payouts"]
    sheet = payroll_csv(tmp_path / "names.csv", "N", n=600)  # row 500 invalid
    params = PayoutRunParams(
        source=str(sheet),
        label="spilled-names",
        report_dir=str(tmp_path / "reports"),
        on_invalid_rows="skip",
        require_approval=True,
        poll_deadline_s=120,
        settle_window_s=2,
    )
    shown: dict = {}

    async def approve(run_id: str, description: str) -> None:
        with payops_db() as engine:
            requests = ApprovalRequests(engine)
            shown["rows"] = requests.count_rows(run_id)
            shown["verdicts"] = Counter(r.verdict for r in requests.rows(run_id, limit=1000))
            shown["request"] = requests.get(run_id)
        assert emulator_stats(env.base_url)["payouts"] == before  # nothing sent before the approval
        assert "continues" in await decide_as(run_id, "bea")

    flow = payout_spreadsheet.with_options(flow_run_name=params.label)
    _, _, state = run_paused(lambda: flow(params, return_state=True), params.label, approve)
    s = run_summary(state).as_json()
    valid = 600 - sum(1 for i in INVALID if i < 600)
    assert s["outcome"] == "completed" and s["rows_valid"] == valid
    assert shown["rows"] == valid and sum(shown["verdicts"].values()) == valid
    assert "" not in shown["verdicts"]  # every row shows its check, read back from the spill
    assert shown["verdicts"] == Counter(s["preflight"]["name_checks"])
    assert shown["request"].rows == valid
    assert emulator_stats(env.base_url)["payouts"] - before == valid
    with open(s["report_files"]["csv"], newline="", encoding="utf-8") as fh:
        report = list(csv.DictReader(fh))
    checked = Counter(r["Name check"] for r in report if r["Submission"] == "accepted")
    assert checked == Counter(s["preflight"]["name_checks"])
