"""Following the payouts of a finished run that were still waiting (in review, held, not final) when it ended.

A run ends once everything still moving has waited for a person past its settle window
(`tasks.payouts.polling`); its JSON summary keeps those payouts and their last statuses
(``waiting_statuses``). `follow_up` reads each again from the service (the source of truth) and, when one
moved, rewrites the run's JSON summary (statuses, ``awaiting_review``, ``not_final``, the rows needing a
person) and its run record (the row `payops runs` reads, updated in place on the original flow run). The
xlsx/csv results keep the statuses at the end of the run: they are what the run saw; the JSON summary says
what happened since (``followed_up``).

It runs when a payment webhook or the events catch-up reports a payout status change (the `payout-followup`
deployment's trigger), on a schedule, or by hand (`payops payouts followup LABEL`).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import fsspec
from payops.connectors.payments import NotFoundError, PaymentsClient, PaymentsSettings
from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES
from payops.tasks.reports.attention import paid
from payops.tasks.reports.run_reports import report_paths
from payops.tasks.rows.outcome import outcome_kind
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE


class FollowupRefused(ValueError):
    """The run cannot be followed up: no JSON report (the message says where it was looked for)."""


@dataclass
class FollowupResult:
    """What a follow-up found: the payouts that moved (reference → (before, now)), those still waiting."""

    label: str
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)
    still_waiting: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def read_summary(report_dir: str, label: str) -> dict[str, Any]:
    """Run ``label``'s JSON summary from its report folder."""
    path = report_paths(report_dir, label)["json"]
    try:
        with fsspec.open(path, "r", encoding="utf-8") as fh:
            summary = json.load(fh)
    except FileNotFoundError:
        missing = f"no report {path}: the run has not finished, or its reports went elsewhere"
        raise FollowupRefused(missing) from None
    except ValueError as exc:
        raise FollowupRefused(f"the report {path} cannot be read: {exc}") from None
    if not isinstance(summary, dict):
        raise FollowupRefused(f"the report {path} is not a run summary")
    return summary


def waiting(summary: dict[str, Any]) -> dict[str, str]:
    """The run's payouts still waiting when it (or its last follow-up) ended, with their last statuses."""
    known = summary.get("waiting_statuses")
    if isinstance(known, dict):
        return {str(r): str(s) for r, s in known.items()}
    return {}


async def read_statuses(
    client: PaymentsClient, references: list[str], concurrency: int = 8
) -> dict[str, Any]:
    """Each reference's payout as the service has it now (a reference it does not know is left out)."""
    sem = asyncio.Semaphore(concurrency)
    found: dict[str, Any] = {}

    async def one(ref: str) -> None:
        async with sem:
            try:
                found[ref] = await client.payouts.get(ref)
            except NotFoundError:
                return

    await asyncio.gather(*(one(r) for r in references))
    return found


def apply_moves(summary: dict[str, Any], payouts: dict[str, Any]) -> FollowupResult:
    """The summary with the payouts that moved (read now, ``payouts``) put in: counts by status, the waiting
    lists, the rows needing a person (`tasks.reports.attention`), and a ``followed_up`` entry."""
    result = FollowupResult(str(summary.get("label") or ""), summary=summary)
    before = waiting(summary)
    now = {ref: p for ref, p in payouts.items() if ref in before and p.status != before[ref]}
    by_status = Counter({str(k): int(v) for k, v in (summary.get("payouts_by_status") or {}).items()})
    for ref, p in now.items():
        result.moved[ref] = (before[ref], p.status)
        by_status[before[ref]] -= 1
        by_status[p.status] += 1
    statuses = {**before, **{ref: p.status for ref, p in now.items()}}
    still = {ref: s for ref, s in statuses.items() if ref not in now or not _final(now[ref])}
    result.still_waiting = sorted(still)
    summary["payouts_by_status"] = {k: v for k, v in sorted(by_status.items()) if v > 0}
    summary["waiting_statuses"] = still
    summary["not_final"] = sorted(still)
    summary["awaiting_review"] = sorted(
        r for r, s in still.items() if outcome_kind("accepted", s) == "awaiting_review"
    )
    summary["attention_rows"] = _attention(summary.get("attention_rows") or [], now)
    if now:
        history = summary.get("followed_up") if isinstance(summary.get("followed_up"), list) else []
        history.append(
            {
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "moved": {ref: list(moves) for ref, moves in result.moved.items()},
            }
        )
        summary["followed_up"] = history
    return result


def _final(payout: Any) -> bool:
    return payout.status in PAYOUT_FINAL_STATUSES


def _attention(rows: list[dict[str, Any]], now: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows needing a person with the moves put in: an outcome entry takes its new kind (or goes, when
    the payout no longer needs anyone); every entry of a moved payout shows its new status and paid."""
    out = []
    for entry in rows:
        ref = entry.get("reference")
        payout = now.get(ref) if isinstance(ref, str) else None
        if payout is None:
            out.append(entry)
            continue
        entry = {**entry, "status": payout.status, "paid": paid("accepted", payout.status)}
        if entry.get("kind") == "awaiting_review":
            kind = outcome_kind("accepted", payout.status)
            if kind is None:
                continue
            entry["kind"] = kind
            entry["reason"] = payout.failure_reason or payout.status
        out.append(entry)
    return out


def write_summary(report_dir: str, label: str, summary: dict[str, Any]) -> None:
    """Write the JSON summary back in place."""
    with fsspec.open(report_paths(report_dir, label)["json"], "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, default=str)


async def follow_up(
    client: PaymentsClient, report_dir: str, label: str, reference: str = ""
) -> FollowupResult:
    """Read run ``label``'s waiting payouts again (only when ``reference``, a payout that moved, is one of
    them, when given); rewrite its JSON summary when one moved."""
    summary = read_summary(report_dir, label)
    before = waiting(summary)
    if not before or reference and reference not in before:
        return FollowupResult(label, still_waiting=sorted(before), summary=summary)
    result = apply_moves(summary, await read_statuses(client, sorted(before)))
    result.label = label
    if result.moved:
        await asyncio.to_thread(write_summary, report_dir, label, summary)
    return result


async def update_run_record(label: str, summary: dict[str, Any]) -> bool:
    """Put the summary's facts into the run's record (the ``LABEL-record`` artifact of its flow run, updated
    in place so `payops runs` and the console read them); False when the run has no record."""
    from payops.tasks.reports.artifacts import RECORD_DESCRIPTION, artifact_key, run_record
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactUpdate
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async with get_client() as client:
        records = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifact_key(label, "record")])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
        if not records or records[0].description != RECORD_DESCRIPTION:
            return False
        await client.update_artifact(records[0].id, ArtifactUpdate(data=json.dumps([run_record(summary)])))
        return True


async def waiting_runs(limit: int = 50) -> list[tuple[str, str]]:
    """``(label, report folder)`` of the latest ``limit`` payout runs whose record shows payouts still
    waiting, newest first, one per label."""
    from payops.tasks.reports.artifacts import RECORD_DESCRIPTION
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType
    from prefect.client.schemas.sorting import ArtifactSort

    async with get_client() as client:
        records = await client.read_artifacts(
            artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["table"])),
            sort=ArtifactSort.CREATED_DESC,
            limit=limit * 4,
        )
    found: dict[str, str] = {}
    for a in records:
        if a.description != RECORD_DESCRIPTION:
            continue
        rows = json.loads(a.data) if isinstance(a.data, str) else a.data
        facts = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
        label, files = facts.get("label"), facts.get("report_files")
        files = json.loads(files) if isinstance(files, str) and files else files
        path = files.get("json") if isinstance(files, dict) else None
        if label and path and facts.get("not_final") and label not in found:
            found[str(label)] = str(path).rsplit("/", 1)[0]  # the folder of LABEL.json (a path or URL)
        if len(found) >= limit:
            break
    return list(found.items())


@task(cache_policy=NO_CACHE, name="follow-up-payouts", **API_TASK_RETRY)
async def follow_up_task(
    settings: PaymentsSettings, report_dir: str, label: str, reference: str = ""
) -> FollowupResult:
    """Prefect task: one run's waiting payouts read again, its JSON summary rewritten when one moved."""
    async with payments_client(settings) as (client, _transport):
        return await follow_up(client, report_dir, label, reference)
