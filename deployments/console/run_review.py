"""What the run page shows first: the rows needing a person (paged), a chart of outcomes, and the
**Retry failed rows** action (a new upload of the resubmission sheet under the derived label).

Kept apart from the login, session and approval code (`app.py`, `security.py`): the review reads the run's
JSON summary, the retry goes through the same preview and submit as any upload.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from payops.connectors.payments.models import (
    PAYOUT_AWAITING_REVIEW_STATUSES,
    PAYOUT_FAILED_STATUSES,
    PAYOUT_FINAL_STATUSES,
    REFERENCE_PATTERN,
)
from payops.store.retries import RetryRows
from payops.tasks.intake import IntakeResult
from payops.tasks.payouts.retry_sheet import RetryReason
from payops.tasks.reports.attention import KINDS

PAGE_SIZE = 50
KIND_TITLES = {
    "failed": "Failed",
    "refused": "Refused by the service",
    "invalid": "Invalid in the sheet",
    "awaiting_review": "Awaiting review",
    "name_mismatch": "Payee name mismatch",
    "name_partial": "Payee name partly matches",
    "name_unverified": "Payee name not verified",
    "no_name_column": "No payee name column",
}
# Chart segments in a fixed order (the statuses from the connector's sets); anything else (dispatching,
# accepted...) is counted as "not final".
CHART = [
    *((s, "ok") for s in sorted(PAYOUT_FINAL_STATUSES - PAYOUT_FAILED_STATUSES)),
    *((s, "bad") for s in sorted(PAYOUT_FAILED_STATUSES)),
    ("refused", "bad"),
    *((s, "wait") for s in sorted(PAYOUT_AWAITING_REVIEW_STATUSES)),
    ("invalid", "muted"),
    ("not final", "muted"),
]
CHART_WIDTH = 400


def page_number(text: str | None, pages: int) -> int:
    """A page number from a query string, within 1..pages (anything unreadable is page 1)."""
    try:
        number = int(text or 1)
    except ValueError:
        number = 1
    return min(max(number, 1), max(pages, 1))


def attention(summary: dict[str, Any] | None, page: str | None) -> dict[str, Any]:
    """The page of rows needing a person, their counts by kind, and the pager."""
    rows = (summary or {}).get("attention_rows") or []
    rows = [r for r in rows if isinstance(r, dict) and r.get("kind") in KINDS]
    pages = (len(rows) + PAGE_SIZE - 1) // PAGE_SIZE
    number = page_number(page, pages)
    counts = Counter(r["kind"] for r in rows)
    return {
        "rows": rows[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
        "total": len(rows),
        "counts": [(KIND_TITLES[k], counts[k]) for k in KINDS if counts[k]],
        "titles": KIND_TITLES,
        "page": number,
        "pages": pages,
        "retryable": counts["failed"] + counts["refused"],
    }


def outcome_chart(summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Bars of a horizontal stacked chart (SVG drawn by the template): label, count, x, width, css class."""
    if not summary:
        return []
    counts: Counter[str] = Counter()
    known = {name for name, _ in CHART}
    for status, n in (summary.get("payouts_by_status") or {}).items():
        counts[status if status in known else "not final"] += int(n)
    counts["refused"] += int(summary.get("refused_items") or 0)
    counts["invalid"] += int(summary.get("rows_invalid") or 0)
    total = sum(counts.values())
    if not total:
        return []
    bars, x = [], 0.0
    for name, css in CHART:
        if counts[name]:
            width = CHART_WIDTH * counts[name] / total
            bars.append(
                {"label": name, "count": counts[name], "x": round(x, 2), "width": round(width, 2), "css": css}
            )
            x += width
    return bars


def review_context(summary: dict[str, Any] | None, page: str | None) -> dict[str, Any]:
    """Template context of the run page's review block."""
    return {
        "attention": attention(summary, page),
        "chart": outcome_chart(summary),
        "chart_width": CHART_WIDTH,
    }


def failed_so_far(retries: RetryRows, run_id: str) -> dict[str, Any] | None:
    """While a run runs: its rows failed so far that no retry took yet (the **Retry failed rows now**
    button), or None when there are none."""
    label = retries.label_of_run(run_id)
    rows = len(retries.unclaimed(label)) if label else 0
    return {"label": label, "rows": rows} if rows else None


# -- the retry's preview: what it will pay, row by row, and the rows the operator drops --

MAX_RETRY_ROWS = 1000
"""Most rows a retry preview lists (and references its form may drop); a longer retry is listed in part."""
_REFERENCE = re.compile(REFERENCE_PATTERN)


@dataclass(frozen=True)
class RetryUpload:
    """A retry sheet in preview: the run it retries (flow run id, label and the name it is shown by), its
    column mapping, the references dropped so far and those it pays (claimed for it when it is submitted),
    and why each row failed (`tasks.payouts.retry_sheet.retry_reasons`)."""

    run_id: str
    column_map: str = ""
    dropped: frozenset[str] = field(default_factory=frozenset)
    parent: str = ""
    references: tuple[str, ...] = ()
    reasons: Mapping[str, RetryReason] = field(default_factory=dict)
    name: str = ""
    currency: str = ""


def dropped_rows(values: Iterable[Any]) -> frozenset[str]:
    """The references a retry form asks to drop (anything that is not a reference is ignored)."""
    return frozenset(v for v in list(values)[:MAX_RETRY_ROWS] if isinstance(v, str) and _REFERENCE.match(v))


def sheet_rows(
    result: IntakeResult, reasons: Mapping[str, RetryReason] | None = None
) -> list[dict[str, Any]]:
    """Every row of a retry sheet as the preview lists it: row, reference, payee, currency and amount (cells
    as written), destination, why it failed, the next step and whether it will fail again as it is
    (``reasons``, by reference: `retry_reasons`), and its problems (none: it will be paid)."""
    reasons = reasons or {}
    mapped = result.mapped
    problems: dict[int, list[str]] = {}
    for e in result.errors:
        problems.setdefault(e.row, []).append(f"{e.column}: {e.message}")
    rows = []
    for rec in result.table[:MAX_RETRY_ROWS]:
        number = int(rec["__row__"])
        reference = rec.get(mapped.get("reference", ""), "")
        reason = reasons.get(reference)
        rows.append(
            {
                "row": number,
                "reference": reference,
                "payee": rec.get(mapped.get("payee_name", ""), ""),
                "currency": rec.get(mapped.get("currency", ""), ""),
                "amount": rec.get(mapped.get("amount", ""), ""),
                "destination": rec.get(mapped.get("destination", ""), ""),
                "why": reason.why if reason else "",
                "next_step": reason.next_step if reason else "",
                "fails_again": bool(reason and reason.fails_again),
                "run_row": reason.row if reason else None,  # its row in the run's own sheet
                "problems": "; ".join(problems.get(number, [])),
            }
        )
    return rows
