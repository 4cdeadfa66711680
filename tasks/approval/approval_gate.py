"""The payout run's approval gate as plain functions: the policy read from the payops database, the
requirement it sets for a run, and what the run shows its approvers (rows, findings, figures per currency).

The rule is the policy in store/approvals.py; this module only applies it. Parameters can raise the
requirement (``require_approval``, ``approval_threshold``), never lower it. A policy that cannot be read
stops the run: it ends "Not approved", nothing sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from payops.store.approval_requests import ROW_FIELDS, ApprovalRequests
from payops.store.approvals import ApprovalPolicy, Approvals
from payops.store.database import NoDatabase, RunDatabase
from payops.store.notices import Notices
from payops.store.settings import PayopsSettings
from payops.store.users import Users, utcnow
from payops.tasks.approval.approvals import Requirement, Start, row_fields
from payops.tasks.events.auditing import Auditor
from payops.tasks.events.payment_events import Emitter, default_emitter
from payops.tasks.payouts.paid_before import PAID_BEFORE, PaidBefore
from payops.tasks.payouts.preflight import Preflight
from payops.tasks.rows.name_check import NameCheck
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money, money_text
from payops.tasks.wire.references import payout_reference
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

LOOK_VERDICTS = ("mismatch", "partial", "unverified")
"""Name-check verdicts an approver must look at and acknowledge before approving."""
NO_NAME_COLUMN = "no_name_column"
NAME_FINDINGS = (*LOOK_VERDICTS, NO_NAME_COLUMN)
FINDING_KINDS = (*NAME_FINDINGS, PAID_BEFORE)
"""Everything an approver must acknowledge before approving: the name check's findings, and rows another run
paid recently (`tasks.payouts.paid_before`)."""
FINDING_TITLES = {
    "mismatch": "payee name does not match the account holder",
    "partial": "payee name only partly matches the account holder",
    "unverified": "account holder could not be looked up",
    NO_NAME_COLUMN: "no payee names were checked",
    PAID_BEFORE: "paid recently by another run: approving pays them a second time",
}


class PolicyUnreadable(RuntimeError):
    """The approval policy could not be read; the message says why (never a database URL)."""


def read_policy(engine: Engine) -> ApprovalPolicy:
    try:
        return Approvals(engine).policy()
    except SQLAlchemyError as exc:
        raise PolicyUnreadable(f"the approval policy could not be read ({type(exc).__name__})") from None


def unsigned_start(engine: Engine) -> Start:
    """The start of a run without a signed one (Prefect UI, API, schedule, automation): no payops initiator;
    every payops user recorded as holding Prefect's login could have started it (store.users)."""
    try:
        holders = Users(engine).prefect_login_holders()
    except SQLAlchemyError as exc:
        reason = f"who holds Prefect's login could not be read ({type(exc).__name__})"
        raise PolicyUnreadable(reason) from None
    return Start(could_start=tuple(holders))


def totals_by_currency(rows: Iterable[PayoutRow]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for r in rows:
        totals[r.currency] = totals.get(r.currency, Decimal(0)) + r.amount
    return dict(sorted(totals.items()))


def requirement(
    policy: ApprovalPolicy,
    totals: Mapping[str, Decimal],
    start: Start,
    *,
    require_approval: bool = False,
    threshold: Decimal | None = None,
) -> Requirement:
    """Approvals a run needs: the policy's count, raised to at least one by ``require_approval`` or a total
    at or over ``threshold``; never lowered by either."""
    need = policy.required(totals)
    if require_approval or (threshold is not None and any(t >= threshold for t in totals.values())):
        need = max(need, 1)
    return Requirement(need, start.excluded, start.initiator)


def request_rows(
    rows: Iterable[PayoutRow], label: str, names: Mapping[int, NameCheck]
) -> Iterator[dict[str, Any]]:
    """Every row as the approval page stores and shows it (row fields as text, verdict, holder, look)."""
    for r in rows:
        values = dict(zip(ROW_FIELDS, row_fields(r, payout_reference(r, label)), strict=True))
        values["row"] = r.row
        check = names.get(r.row)
        verdict = check.verdict if check else ""
        values.update(
            verdict=verdict, holder=(check.holder_name or "") if check else "", look=verdict in LOOK_VERDICTS
        )
        yield values


def findings(
    rows: list[PayoutRow],
    names: Iterable[NameCheck],
    names_checked: bool,
    paid: PaidBefore | None = None,
) -> dict[str, list[int]]:
    """Rows by finding an approver must acknowledge: the name check's (``no_name_column`` when no name was
    checked: ``names_checked`` False, no payee-name column, tasks.payouts.sheet_check.no_name_column, or the
    check turned off; or the column holds no name at all), and ``paid_before`` when ``paid`` found rows
    another run paid (a second payment)."""
    out: dict[str, list[int]] = {}
    for n in names:
        if n.verdict in LOOK_VERDICTS:
            out.setdefault(n.verdict, []).append(n.row)
    if not names_checked or not any(r.payee_name for r in rows):
        out[NO_NAME_COLUMN] = []
    if paid is not None:
        out.update(paid.finding())
    return {k: sorted(out[k]) for k in FINDING_KINDS if k in out}


def _opt(value: Decimal | None) -> str | None:
    return None if value is None else money(value)


def currency_figures(pf: Preflight) -> dict[str, dict[str, Any]]:
    """Per currency: payouts, amount, fees (upper bound), with fees, available balance, balance after, the
    limits' headroom. Money as two-decimal text (JSON and signatures never carry floats)."""
    out: dict[str, dict[str, Any]] = {}
    for cur, c in sorted(pf.currencies.items()):
        if not c.count:
            continue
        after = None if c.available is None else c.available - c.needed
        out[cur] = {
            "payouts": c.count,
            "amount": money(c.amount),
            "fees": money(c.fees),
            "with_fees": money(c.needed),
            "available": _opt(c.available),
            "after": _opt(after),
            "daily_remaining": _opt(c.daily_remaining),
            "monthly_remaining": _opt(c.monthly_remaining),
            "per_transaction": _opt(c.per_transaction),
        }
    return out


def deadline_after(seconds: int) -> datetime:
    """An approval deadline as the database keeps times (naive UTC)."""
    return utcnow() + timedelta(seconds=seconds)


class ApprovalDesk:
    """The flow's side of the approval tables (request and rows, notices, decisions, audit) on one engine.
    Blocking calls: the flow runs them in a thread."""

    def __init__(self, engine: Engine, emitter: Emitter | None = None, *, audit_key: bytes) -> None:
        self.engine = engine
        self.requests = ApprovalRequests(engine)
        self.notices = Notices(engine)
        self.approvals = Approvals(engine)
        self.auditor = Auditor(engine, emitter or default_emitter, key=audit_key)

    def open(
        self,
        *,
        run_id: str,
        label: str,
        start: Start,
        need: Requirement,
        policy: ApprovalPolicy,
        fingerprint_: str,
        figures: dict[str, dict[str, Any]],
        findings_: dict[str, list[int]],
        rows: Iterable[dict[str, Any]],
        timeout_s: int,
        paid: PaidBefore | None = None,
    ) -> None:
        """Record the request and its rows (and the runs that paid them before), tell the approvers, audit
        it."""
        self.requests.open(
            flow_run_id=run_id,
            label=label,
            channel=start.channel,
            initiator=start.initiator,
            uploader=start.uploader,
            required=need.required,
            excluded=need.excluded,
            policy=policy.describe(),
            fingerprint=fingerprint_,
            totals=figures,
            findings=findings_,
            deadline=deadline_after(timeout_s),
            rows=rows,
            paid_before=paid.as_json() if paid is not None else None,
        )
        totals = ", ".join(money_text(f["amount"], cur) for cur, f in figures.items())
        others = f" (not {', '.join(need.excluded)})" if need.excluded else ""
        self.notices.post(
            "approval_needed",
            run_id,
            label,
            f"Payout run {label} waits for {counted(need.required, 'approval')}{others}: {totals}; "
            f"{start.describe()}; expires in {timeout_s // 60} min.",
            role="approver",
            excluded=need.excluded,
        )
        self.auditor.record(
            start.initiator or "(prefect)",
            "run.approval_requested",
            f"run:{run_id}",
            label=label,
            channel=start.channel,
            started=start.describe(),
            required=need.required,
            totals={cur: f["amount"] for cur, f in figures.items()},
            rows=sum(int(f["payouts"]) for f in figures.values()),
            policy=policy.describe(),
        )

    def remind(self, run_id: str, label: str, need: Requirement, seconds_left: int) -> None:
        self.requests.mark_reminded(run_id)
        self.notices.post(
            "approval_reminder",
            run_id,
            label,
            f"Reminder: payout run {label} still waits for approval; it expires in "
            f"{max(seconds_left // 60, 1)} min.",
            role="approver",
            excluded=need.excluded,
        )
        self.auditor.record(
            "payops", "run.approval_reminded", f"run:{run_id}", label=label, seconds_left=seconds_left
        )

    def close(self, run_id: str, state: str, actor: str, **detail: Any) -> None:
        """The request is decided: its state, its notices closed, an audit entry."""
        self.requests.close(run_id, state)
        self.notices.close_run(run_id)
        self.auditor.record(actor, "run.approval_decided", f"run:{run_id}", state=state, **detail)

    def expire(self, run_id: str, label: str, need: Requirement) -> None:
        """Nobody approved in time: closed as expired, the approvers told, audited as an expiry."""
        self.requests.close(run_id, "expired")
        self.notices.close_run(run_id)
        self.notices.post(
            "approval_expired",
            run_id,
            label,
            f"Payout run {label} expired without approval: nothing was sent.",
            role="approver",
            excluded=need.excluded,
        )
        self.auditor.record("payops", "run.approval_expired", f"run:{run_id}", label=label)


@asynccontextmanager
async def payops_store(settings: PayopsSettings) -> AsyncIterator[RunDatabase]:
    """The payops database for one run (the process's engine, its schema at the newest revision), or why it
    cannot be read: a database behind this payops' schema is unreadable too (`payops db upgrade`)."""
    from payops.store import SchemaBehind, open_database

    try:
        engine = await asyncio.to_thread(open_database, settings)
    except SchemaBehind as exc:  # one line naming the database without its password, and the command
        yield NoDatabase(str(exc))
        return
    except (
        SQLAlchemyError,
        ImportError,
        ValueError,
        OSError,
    ) as exc:  # never the URL: it may hold a password
        yield NoDatabase(f"the payops database could not be opened ({type(exc).__name__})")
        return
    yield engine
