"""Prefect artifacts for a run: keys, the pre-flight and summary markdown, the results table."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

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


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """Human summary of a run with links to the report files."""
    lines = [f"# Payout run `{summary['label']}`", "", f"**Outcome:** {summary.get('outcome')}", ""]
    lines.append(
        markdown_table(
            ["rows", "valid", "invalid", "batches", "amount", "fees"],
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
    by_status = summary.get("payouts_by_status") or {}
    if by_status:
        lines += [
            "",
            "## Payouts by status",
            "",
            markdown_table(["status", "count"], sorted(by_status.items())),
        ]
    if summary.get("awaiting_review"):
        lines += ["", f"**Awaiting review:** {len(summary['awaiting_review'])} payout(s) in_review or held."]
    files = summary.get("report_files") or {}
    if files:
        lines += ["", "## Reports", ""] + [f"- [{k}]({v})" for k, v in files.items()]
    return "\n".join(lines)


async def publish_run_artifacts(label: str, summary: Mapping[str, Any], failed_rows: Sequence[Sequence[Any]]):
    """Markdown summary and a table of the rows that need attention."""
    from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

    await acreate_markdown_artifact(
        key=artifact_key(label, "summary"),
        markdown=summary_markdown(summary),
        description=f"Payout run {label}",
    )
    headers = ["row", "reference", "submission", "status", "failure reason", "error code"]
    await acreate_table_artifact(
        key=artifact_key(label, "attention"),
        table=[dict(zip(headers, r, strict=True)) for r in failed_rows[:500]],
        description="Rows refused, failed, refunded or awaiting review (first 500)",
    )
