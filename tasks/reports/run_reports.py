"""Run reports: xlsx (results, summary, resubmit), csv and the JSON summary, to a folder or fsspec URL.

The results sheet echoes the sheet's own columns, then payops' outcome columns (`RESULT_COLUMNS`). In the
xlsx the echoed cells are the values payops read, so finance sums the sheet's own amount column too:

- the column payops read as the amount holds the typed amount (a number, Decimal-exact) on every row payops
  validated; a row it could not read keeps the sheet's text, so the column sums to the typed total;
- the other columns payops read (reference, phone number, payee, currency, ...) stay text as the sheet had
  them: ``+233 24 ...`` and ``0244...`` keep their plus and leading zero;
- a column payops did not read is echoed as numbers when every non-empty cell is a plain decimal number
  (`plain_number`: an optional minus, no leading zero, at most 11 digits before the point and 15 in all, so
  Excel holds and shows it exactly); otherwise it stays text, so an "Employee ID" of 00123 or an account
  number keeps its digits.

The csv carries the sheet's text as read, in every column (a csv has no types).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import fsspec
from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES
from payops.store.settings import PayopsSettings, absolute_location
from payops.tasks.reports.attention import charged_fee, outcome_words
from payops.tasks.reports.table_workbook import PlainNumber, table_workbook
from payops.tasks.reports.xlsx import neutralise, write_csv
from payops.tasks.rows.outcome import RowFacts, RowOutcome, outcome_kind
from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.wire.money import money

RESULT_COLUMNS = [
    "Reference (sent)",
    "Batch",
    "Submission",
    "Payout status",
    "Amount",
    "Currency",
    "Fee",
    "Holder name",
    "Name check",
    "Failure reason",
    "Error code",
    "Error message",
    "What happened",
    "Next step",
    "Completed at (UTC)",
]
"""The outcome columns after the sheet's own. In the xlsx, Amount and Fee are numbers (two-decimal currency
format) and Completed at an Excel date-time in UTC; in the csv they are the plain wire text. The codes
(Failure reason, Error code) are for machines; What happened and Next step say them in words
(`tasks.reports.attention.outcome_words`)."""
RESUBMIT_SHEET = "resubmit"
"""The report's sheet of rows to pay again, read back by `tasks.payouts.retry_sheet`."""
_RESUBMIT_TAG = re.compile(r"-rs(\d+)$")
_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,10})(?:\.[0-9]+)?").fullmatch
_EXACT_DIGITS = 15
"""Significant digits a spreadsheet number holds exactly (a double, as Excel shows it)."""
_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9._-]+")


_NO_FACTS = RowFacts()


def _outcome_cells(o: RowOutcome, f: RowFacts, typed: bool) -> list[Any]:
    """The outcome columns of one row: Decimal and datetime values for the xlsx (``typed``), text for csv."""
    fee: Any = charged_fee(o)  # 0 for a failed payout: the service released its fee
    completed: Any = o.completed_at
    amount: Any = f.amount
    if typed:
        completed = _utc(completed) if completed else None
    else:
        amount = None if amount is None else money(amount)
        fee = None if fee is None else money(fee)
    words, next_step = outcome_words(o) or (None, None)
    return [
        o.reference,
        o.batch,
        o.submission,
        o.status,
        amount,
        f.currency,
        fee,
        f.holder_name,
        f.name_check,
        o.failure_reason,
        o.error_code,
        o.error_message,
        words,
        next_step,
        completed,
    ]


def _utc(moment: str) -> datetime:
    """An ISO date-time as a naive UTC datetime (an Excel cell has no zone; the header says UTC)."""
    parsed = datetime.fromisoformat(moment)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
    return parsed.replace(tzinfo=None)


def report_root(report_dir: str) -> str:
    """The folder a run's reports go to. Each flow resolves an empty ``report_dir`` to the settings' report
    root at its start (`store.settings.PayopsSettings.reports`); an empty one here is a caller's bug."""
    if not report_dir:
        raise ValueError("report_dir is empty: the entry point passes PayopsSettings.reports")
    return report_dir


def console_report_url(path: str, settings: PayopsSettings) -> str | None:
    """The console address serving the report at ``path`` (``{PAYOPS_CONSOLE_URL}/reports/<path under the
    report root>``), or None when no console is configured or the file lies outside the report root."""
    console = settings.console
    if not console:
        return None
    root, target = settings.reports, absolute_location(path)
    if not target.startswith(root + "/"):
        return None
    parts = target[len(root) + 1 :].split("/")
    if any(p in {"", ".", ".."} for p in parts):
        return None
    return f"{console}/reports/" + "/".join(quote(p, safe="") for p in parts)


def report_filename(label: str) -> str:
    return _UNSAFE_FILE.sub("-", label).strip("-.") or "run"


def resubmit_reference(reference: str) -> str:
    """A fresh, deterministic reference for paying a failed row again: `-rs1`, then `-rs2`, ..."""
    m = _RESUBMIT_TAG.search(reference)
    n = int(m.group(1)) + 1 if m else 1
    base = reference[: m.start()] if m else reference
    tag = f"-rs{n}"
    return base[: 64 - len(tag)] + tag


def report_paths(report_dir: str, label: str) -> dict[str, str]:
    base = report_root(report_dir).rstrip("/") + "/" + report_filename(label)
    return {
        "xlsx": base + ".xlsx",
        "csv": base + ".csv",
        "json": base + ".json",
        "validation": base + "-validation.xlsx",
    }


class ReportWouldOverwriteSource(ValueError):
    """A report path is the input sheet itself."""


def ensure_reports_spare_source(report_dir: str, label: str, source: str) -> None:
    """Refuse a run whose report would overwrite the sheet being paid (checked before anything is sent)."""

    def norm(p: str) -> str:
        fs, path = fsspec.core.url_to_fs(p)
        return f"{fs.protocol}:{fs._strip_protocol(path)}" if "://" in p else str(Path(path).resolve())

    src = norm(source)
    for path in report_paths(report_dir, label).values():
        if norm(path) == src:
            raise ReportWouldOverwriteSource(
                f"the report {path} would overwrite the sheet being paid; use another folder or label"
            )


def _result_headers(columns: Sequence[str]) -> list[str]:
    taken = set(RESULT_COLUMNS)
    return [f"{c} (sheet)" if c in taken else c for c in columns] + RESULT_COLUMNS


def plain_number(text: str) -> bool:
    """Whether a sheet's cell is a plain decimal number a spreadsheet holds exactly (module docstring)."""
    if not _PLAIN_NUMBER(text):
        return False
    return len(text.lstrip("-").replace(".", "").lstrip("0")) <= _EXACT_DIGITS


def number_columns(
    columns: Sequence[str], table: Iterable[Mapping[str, str]], read: Iterable[str] = ()
) -> frozenset[str]:
    """The columns not among ``read`` (the ones payops read) whose every non-empty cell is a
    :func:`plain_number`, with at least one such cell: echoed as numbers (module docstring). Stops reading
    the table once every column has a cell that is not a number."""
    left = [c for c in columns if c not in set(read)]
    seen: set[str] = set()
    for rec in table:
        if not left:
            break
        for c in list(left):
            cell = rec.get(c) or ""
            if not cell:
                continue
            if plain_number(cell):
                seen.add(c)
            else:
                left.remove(c)
    return frozenset(c for c in left if c in seen)


def results_rows(
    columns: Sequence[str],
    table: Iterable[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    facts: Mapping[int, RowFacts] | None = None,
    *,
    typed: bool = False,
    amount_column: str | None = None,
    numbers: frozenset[str] = frozenset(),
) -> Iterator[list[Any]]:
    """The results sheet's rows, one at a time: the sheet's cells, then the outcome's (the writers neutralise
    every cell). ``typed`` (the xlsx): money and times typed, the sheet's ``amount_column`` as the typed
    amount where the row has one and its ``numbers`` columns (`number_columns`) as numbers; else the cells
    as read (module docstring)."""
    facts = facts or {}
    amount_at = columns.index(amount_column) if typed and amount_column in columns else None
    number_at = [i for i, c in enumerate(columns) if c in numbers] if typed else []
    for rec in table:
        row = int(rec["__row__"])
        o = outcomes.get(row) or RowOutcome(row)
        f = facts.get(row, _NO_FACTS)
        cells: list[Any] = [rec.get(c, "") for c in columns]
        if amount_at is not None and f.amount is not None:
            cells[amount_at] = f.amount
        for i in number_at:
            if cells[i]:
                cells[i] = PlainNumber(cells[i])
        yield cells + _outcome_cells(o, f, typed)


def resubmit_rows(
    columns: Sequence[str],
    table: Sequence[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    reference_column: str | None,
) -> tuple[list[str], list[list[Any]]]:
    """Failed and refused rows with fresh references, in the sheet's own columns (its own reference column,
    whatever header the intake mapped, else a ``reference`` column first), ready to upload again.

    The cells are the sheet's own text, without the formula guard: payops reads them back
    (`tasks.reports.xlsx.READ_BACK_RULE`)."""
    headers = list(columns) if reference_column else ["reference", *columns]
    rows = []
    for rec in table:
        o = outcomes.get(int(rec["__row__"]))
        if o is None or not o.needs_resubmit or not o.reference:
            continue
        fresh = resubmit_reference(o.reference)
        values = [fresh if c == reference_column else rec.get(c, "") for c in columns]
        rows.append(values if reference_column else [fresh, *values])
    return headers, rows


def _decision_pairs(decisions: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """One summary line per approver: who, what, when and what they wrote."""
    return [
        [f"approval.{d.get('decision')} by {d.get('by')}", f"{d.get('at')}: {d.get('comment') or ''}"]
        for d in decisions
    ]


def summary_pairs(summary: Mapping[str, Any]) -> list[list[Any]]:
    pairs: list[list[Any]] = []
    for key, value in summary.items():
        if key in {"errors", "warnings", "row_outcomes", "attention_rows"}:
            pairs.append([key, len(value)])
        elif key == "approval" and isinstance(value, dict):
            rest = {k: v for k, v in value.items() if k != "decisions"}
            for k, v in rest.items():
                pairs.append([f"approval.{k}", ", ".join(map(str, v)) if isinstance(v, list) else v])
            pairs += _decision_pairs(value.get("decisions") or [])
        elif isinstance(value, dict):
            for k, v in value.items():
                pairs.append([f"{key}.{k}", json.dumps(v) if isinstance(v, dict | list) else v])
        elif isinstance(value, list):
            pairs.append([key, ", ".join(map(str, value))])
        else:
            pairs.append([key, value])
    return [[neutralise(k), neutralise(v)] for k, v in pairs]


TOTAL_LABEL = "Total"
"""The first cell of the results sheet's totals row (under the rows): ``Total: N rows``."""


def with_totals(
    rows: Iterable[list[Any]], headers: Sequence[str], amount_column: str | None
) -> Iterator[list[Any]]:
    """The typed results rows as they come, then a totals row: the row count, the sheet's amount column and
    payops' Amount summed over the typed amounts (a number; a row payops could not read keeps its text and
    is not summed), the Fee column summed over the fees charged (rows without a fee add nothing)."""
    summed = [headers.index(h) for h in ("Amount", "Fee")]
    if amount_column is not None:
        summed.insert(0, headers.index(amount_column))
    totals = dict.fromkeys(summed, Decimal(0))
    count = 0
    for row in rows:
        count += 1
        for i in summed:
            v = row[i]
            if type(v) is Decimal and v.is_finite():
                totals[i] += v
        yield row
    label_at = 0 if 0 not in totals else headers.index("Reference (sent)")
    last: list[Any] = [None] * len(headers)
    last[label_at] = f"{TOTAL_LABEL}: {counted(count, 'row')}"
    for i, total in totals.items():
        last[i] = total
    yield last


_STATUS_WORDS = {
    "delivered": "Payouts delivered",
    "failed": "Payouts failed",
    "refunded": "Payouts refunded after delivery",
    "in_review": "Payouts in review at the provider",
    "held": "Payouts held",
    "pending": "Payouts still pending",
    "processing": "Payouts still processing",
    "accepted": "Payouts accepted, not final yet",
    None: "Payouts with no status read",
}
_OUTCOME_WORDS = {
    Outcome.COMPLETED: "Completed",
    Outcome.DRY_RUN: "Dry run: checked, nothing sent",
    Outcome.NOT_APPROVED: "Not approved: nothing sent",
    Outcome.INVALID_INPUT: "Refused: the sheet has invalid rows; nothing sent",
    Outcome.PREFLIGHT_FAILED: "Refused at pre-flight; nothing sent",
}
_MOVED = [
    ("paid", "Paid"),
    ("paid_payouts", "Payouts paid"),
    ("not_paid", "Not paid"),
    ("not_paid_payouts", "Payouts not paid"),
    ("fees", "Fees charged"),
    ("wallet_effect", "Wallet movement"),
]
"""The summary's ``moved`` per currency, in the summary sheet's words (money keys are decimal strings)."""


def _figure(value: Any) -> Any:
    """A money string as a Decimal (a number in the sheet's money format); anything else as it is."""
    if isinstance(value, str):
        try:
            number = Decimal(value)
        except ArithmeticError:
            return value
        return number if number.is_finite() else value
    return value


def people_summary(summary: Mapping[str, Any], now: datetime | None = None) -> list[list[Any]]:
    """The summary sheet of a payout run's xlsx, for a finance person: labelled figures (run, source,
    outcome, rows, payouts by status in words, money as numbers, approval, when). The machine fields (rate
    limit, API calls, timings...) stay in the JSON summary file only."""
    by_status: Mapping[Any, int] = summary.get("payouts_by_status") or {}
    failed = sum(int(by_status.get(s) or 0) for s in PAYOUT_FAILED_STATUSES)
    refused = int(summary.get("refused_items") or 0)
    outcome = summary.get("outcome")
    words = _OUTCOME_WORDS.get(outcome, str(outcome or ""))
    if outcome == Outcome.COMPLETED and (failed or refused):
        words = "Completed with failures"
    pairs: list[list[Any]] = [
        ["Run", summary.get("label")],
        ["Source sheet", summary.get("source")],
        ["Outcome", words],
        ["Rows in the sheet", summary.get("rows_total")],
        ["Rows valid", summary.get("rows_valid")],
        ["Rows invalid", summary.get("rows_invalid")],
    ]
    for status, n in sorted(by_status.items(), key=lambda kv: str(kv[0])):
        pairs.append([_STATUS_WORDS.get(status, f"Payouts {str(status).replace('_', ' ')}"), n])
    if refused:
        pairs.append(["Payouts refused by the service", refused])
    if "attention_total" in summary:
        pairs.append(["Rows needing a person", summary.get("attention_total")])
    moved = summary.get("moved")
    if isinstance(moved, Mapping) and moved:
        currency = summary.get("currency")
        suffix = f" ({currency})" if currency else ""
        pairs.append([f"Amount in the sheet{suffix}", _figure(summary.get("amount_total"))])
        for currency, figures in sorted(moved.items()):
            for key, words_of in _MOVED:
                if isinstance(figures, Mapping) and key in figures:
                    pairs.append([f"{words_of} ({currency})", _figure(figures[key])])
    else:
        currency = summary.get("currency")
        suffix = f" ({currency})" if currency else ""
        pairs.append([f"Amount in the sheet{suffix}", _figure(summary.get("amount_total"))])
        if summary.get("fee_total") is not None:
            pairs.append([f"Fees{suffix}", _figure(summary.get("fee_total"))])
    approval = summary.get("approval")
    if isinstance(approval, Mapping) and approval:
        who = ", ".join(map(str, approval.get("approvers") or [])) or approval.get("by")
        pairs.append(["Approved" if approval.get("approved") else "Approval", who or "no"])
        for d in approval.get("decisions") or []:
            pairs.append(
                [
                    f"Approval: {d.get('decision')} by {d.get('by')}",
                    f"{d.get('at')}: {d.get('comment') or ''}",
                ]
            )
    recon = summary.get("reconciliation")
    if isinstance(recon, Mapping) and recon.get("status"):
        pairs.append(["Reconciliation", recon.get("status")])
    pairs.append(["Report written (UTC)", (now or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)])
    return [[k, v] for k, v in pairs if v is not None and v != ""]


def write_reports(
    report_dir: str,
    label: str,
    columns: Sequence[str],
    table: Sequence[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    summary: dict[str, Any],
    reference_column: str | None,
    facts: Mapping[int, RowFacts] | None = None,
    read_columns: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Write LABEL.xlsx, LABEL.csv and LABEL.json under `report_dir` (a folder or an fsspec URL); ``facts``
    (`row_facts`) fill the amount, currency and name-check columns; ``read_columns`` (the intake's field →
    header mapping) says which of the sheet's columns payops read, the amount's among them (module
    docstring)."""
    paths = {k: v for k, v in report_paths(report_dir, label).items() if k != "validation"}
    fs, root = fsspec.core.url_to_fs(report_root(report_dir))
    fs.makedirs(root, exist_ok=True)
    summary["report_files"] = paths

    # Rows are generated as written, twice (xlsx, csv), rather than held: generating a row is cheap, and
    # 100,000 rows held as lists are not (docs/performance.md, *Memory at 100,000 rows*).
    headers = _result_headers(columns)
    status_col, sub_col = headers.index("Payout status"), headers.index("Submission")

    def attention(r: Sequence[Any]) -> bool:
        return outcome_kind(r[sub_col], r[status_col]) is not None

    read = dict(read_columns or {})
    numbers = number_columns(columns, table, read.values())
    with table_workbook(paths["xlsx"]) as wb:
        amount_column = read.get("amount")
        rows = results_rows(
            columns, table, outcomes, facts, typed=True, amount_column=amount_column, numbers=numbers
        )
        sheet_amount = headers[columns.index(amount_column)] if amount_column in columns else None
        wb.add_long_sheet("results", headers, with_totals(rows, headers, sheet_amount), highlight=attention)
        wb.add_sheet("summary", ["Payout run", "Figure"], people_summary(summary))
        rh, rr = resubmit_rows(columns, table, outcomes, reference_column)
        wb.add_long_sheet(RESUBMIT_SHEET, rh, rr, read_back=True)

    write_csv(paths["csv"], headers, results_rows(columns, table, outcomes, facts))
    with fsspec.open(paths["json"], "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, default=str)
    return paths
