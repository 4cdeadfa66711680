"""Prefect artifacts for a run: keys, the pre-flight and summary markdown, the results table."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from payops.connectors.payments.failure_words import failure_words
from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES
from payops.store.settings import PayopsSettings
from payops.tasks.reports.attention import ATTENTION_TABLE_HEADERS
from payops.tasks.reports.money_moved import MOVED_HEADERS, moved_rows
from payops.tasks.reports.run_reports import console_report_url
from payops.tasks.runtime.plurals import counted

_KEY = re.compile(r"[^a-z0-9-]+")


def artifact_key(label: str, kind: str) -> str:
    """Artifact keys allow lowercase letters, digits and dashes only."""
    return _KEY.sub("-", f"{label}-{kind}".lower()).strip("-")[:120]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return str("" if v is None else v).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(out)


def report_link(path: str, settings: PayopsSettings) -> str:
    """Markdown for one report file: a link the console serves (`console_report_url`), else the path as code
    text (a bare path as a link opens nothing in Prefect's UI)."""
    name = PurePosixPath(str(path)).name or str(path)
    url = console_report_url(str(path), settings)
    if url:
        return f"[{name}]({url})"
    return "`" + str(path).replace("`", "'") + "`"


def report_lines(files: Mapping[str, Any] | None, settings: PayopsSettings) -> list[str]:
    """The ``## Reports`` section of an artifact (empty when the run wrote none)."""
    if not files:
        return []
    links = [f"- {kind}: {report_link(str(path), settings)}" for kind, path in files.items()]
    return ["", "## Reports", "", *links]


def summary_markdown(summary: Mapping[str, Any], settings: PayopsSettings, why: str | None = None) -> str:
    """Human summary of a run with links to the report files; ``why`` says why it sent nothing. A run whose
    payouts failed or were refused leads with a warning line (its state's badge in Prefect is green)."""
    lines = warning_lines(summary)
    lines += [f"# Payout run `{summary['label']}`", "", f"**Outcome:** {summary.get('outcome')}", ""]
    if why:
        lines += [f"**Why:** {why}", ""]
    moved = summary.get("moved") or {}
    lines.append(
        markdown_table(
            ["rows", "valid", "invalid", "batches", "sheet total", "fees charged" if moved else "fees"],
            [
                [
                    summary.get("rows_total"),
                    summary.get("rows_valid"),
                    summary.get("rows_invalid"),
                    summary.get("batches"),
                    summary.get("amount_total"),
                    summary.get("fee_total"),
                ]
            ],
        )
    )
    if moved:  # what left the wallet, from the one source (`tasks.reports.money_moved`)
        lines += ["", "## Money moved", "", markdown_table(MOVED_HEADERS, moved_rows(moved))]
    by_status = summary.get("payouts_by_status") or {}
    if by_status:
        lines += [
            "",
            "## Payouts by status",
            "",
            markdown_table(["status", "count"], sorted(by_status.items())),
        ]
    if summary.get("awaiting_review"):
        lines += [
            "",
            f"**Awaiting review:** {counted(len(summary['awaiting_review']), 'payout')} in review or held.",
        ]
    approval = summary.get("approval") or {}
    if approval:
        who = ", ".join(approval.get("approvers") or [])
        lines += [
            "",
            f"**Approval:** {'approved' if approval.get('approved') else 'not approved'}"
            + (f" by {who}" if who else "")
            + (f"; comment: {approval['comment']}" if approval.get("comment") else ""),
        ]
    errors = summary.get("errors") or []
    if errors:
        lines += ["", f"## Sheet errors (first {min(len(errors), 20)} of {len(errors)})", ""]
        rows = [[e.get("row"), e.get("column"), e.get("message")] for e in errors[:20]]
        lines.append(markdown_table(["row", "column", "problem"], rows))
    recon = summary.get("reconciliation") or {}
    if recon:
        kinds = ", ".join(f"{k} {v}" for k, v in (recon.get("by_kind") or {}).items())
        lines += ["", f"**Reconciliation:** {recon.get('status')}" + (f" ({kinds})" if kinds else "")]
    problems = (summary.get("preflight") or {}).get("problems") or []
    if problems:
        lines += ["", "## Pre-flight problems", ""] + [f"- {p}" for p in problems]
    lines += reason_lines(summary.get("attention_rows") or [])
    lines += report_lines(summary.get("report_files"), settings)
    return "\n".join(lines)


def warning_lines(summary: Mapping[str, Any]) -> list[str]:
    """The artifact's first line when payouts failed, were refunded or were refused (empty otherwise)."""
    by_status = summary.get("payouts_by_status") or {}
    failed = sum(int(by_status.get(s) or 0) for s in PAYOUT_FAILED_STATUSES)
    refused = int(summary.get("refused_items") or 0)
    if not failed and not refused:
        return []
    parts = [f"{counted(failed, 'payout')} failed or refunded"] if failed else []
    parts += [f"{counted(refused, 'payout')} refused by the service"] if refused else []
    return [
        f"> **Warning: completed with failures.** {'; '.join(parts)}: see *What needs a person* below and "
        "the report's resubmit sheet. The run is tagged `payout-failures`.",
        "",
    ]


def reason_lines(attention: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``## What needs a person`` section: the rows needing a person counted by what happened, in words,
    with the next step and the code (empty when none do)."""
    counts = Counter(a.get("code") for a in attention if isinstance(a, Mapping))
    if not counts:
        return []
    rows = [[*failure_words(code), n, f"`{code}`" if code else "-"] for code, n in counts.most_common()]
    table = markdown_table(["what happened", "next step", "rows", "code"], rows)
    return ["", "## What needs a person", "", table]


async def publish_run_artifacts(
    label: str,
    summary: Mapping[str, Any],
    failed_rows: Sequence[Sequence[Any]] | None,
    settings: PayopsSettings,
    why: str | None = None,
) -> None:
    """Markdown summary (with ``why`` for a run that sent nothing) and a table of the rows that need
    attention (none when ``failed_rows`` is None: nothing was sent)."""
    from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

    await acreate_markdown_artifact(
        key=artifact_key(label, "summary"),
        markdown=summary_markdown(summary, settings, why),
        description=f"Payout run {label}",
    )
    if failed_rows is None:
        return
    headers = ATTENTION_TABLE_HEADERS
    await acreate_table_artifact(
        key=artifact_key(label, "attention"),
        table=[dict(zip(headers, r, strict=True)) for r in failed_rows[:500]],
        description="Rows refused, failed, refunded or awaiting review (first 500)",
    )


RECORD_DESCRIPTION = "payops run record"


def run_record(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One row of facts about a finished run, read back by `payops runs` (flat values: a Prefect table)."""
    approval = summary.get("approval") or {}
    return {
        "label": summary.get("label"),
        "outcome": summary.get("outcome"),
        "rows_total": summary.get("rows_total"),
        "rows_valid": summary.get("rows_valid"),
        "rows_invalid": summary.get("rows_invalid"),
        "amount_total": summary.get("amount_total"),
        "fee_total": summary.get("fee_total"),
        "moved": json.dumps(summary.get("moved") or {}, sort_keys=True),
        "payouts_by_status": json.dumps(summary.get("payouts_by_status") or {}, sort_keys=True),
        "refused_items": summary.get("refused_items", 0),
        "awaiting_review": len(summary.get("awaiting_review") or []),
        "not_final": len(summary.get("not_final") or []),
        "needs_attention": summary.get("attention_total", len(summary.get("attention_rows") or [])),
        "started_by": summary.get("started_by"),
        "approved": approval.get("approved"),
        "approved_by": ", ".join(approval.get("approvers") or []) or approval.get("by"),
        "approval_comment": approval.get("comment"),
        "report_files": json.dumps(summary.get("report_files") or {}, sort_keys=True),
        "reconciliation": (summary.get("reconciliation") or {}).get("status"),
    }


async def publish_run_record(summary: Mapping[str, Any]) -> None:
    """The run record as a one-row table artifact of the flow run (every outcome, refusals included)."""
    from prefect.artifacts import acreate_table_artifact
    from prefect.runtime import flow_run

    await acreate_table_artifact(
        key=artifact_key(summary.get("label") or f"run-{flow_run.id}", "record"),
        table=[run_record(summary)],
        description=RECORD_DESCRIPTION,
    )
