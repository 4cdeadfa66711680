"""Settlement policy and runs: verify destinations, settle now, scheduled runs, completion, resettlement.

A run pays the available balance above the policy's ``minimumBalance``, split by destination shares. The
amount is reserved at start; at completion each payment is debited (settled) or released (failed).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any

from payops.connectors.payments.models import SettlementPolicyRequest

from ..clock import iso
from ..errors import ApiError, invalid, not_found
from ..limits import ACCRA
from ..money import ZERO, fmt, q
from ..records import Movement, SettlementItem, SettlementRun, new_id
from ..references import claim_reference, remember_reference
from ..state import PROVIDERS, EnvState

SETTLEMENT_NS = "settlement"
FAILING_SUFFIX = "9991"  # destination accountNumber ending: the payment fails at completion
UNVERIFIED_SUFFIX = "9992"  # PUT policy → 422 destination_not_verified
UNREACHABLE_SUFFIX = "9993"  # PUT policy → 503 destination_verification_unavailable
PROVIDER_TYPES = {"bank": "bank", "mobile_money": "mobile_money"}


def check_policy(env: EnvState, policy: SettlementPolicyRequest) -> None:
    """Providers must exist and fit the destination type; destinations are verified with the provider."""
    for i, dest in enumerate(policy.destinations):
        field = f"destinations[{i}]"
        provider = PROVIDERS.get(dest.provider)
        if provider is None:
            raise invalid(f"{field}.provider", f"unknown provider {dest.provider!r}")
        if provider["type"] != dest.type:
            raise invalid(f"{field}.provider", f"provider {dest.provider} is not a {dest.type} provider")
        if dest.provider not in env.providers:
            raise invalid(f"{field}.provider", f"provider {dest.provider!r} is not available to this account")
    if policy.currency != "GHS":
        raise invalid("currency", "settlements are paid in GHS only")
    for dest in policy.destinations:
        if dest.account_number.endswith(UNREACHABLE_SUFFIX):
            raise ApiError(503, "destination_verification_unavailable", "provider unreachable")
        if dest.account_number.endswith(UNVERIFIED_SUFFIX):
            raise ApiError(
                422,
                "destination_not_verified",
                f"{dest.provider} could not confirm destination {dest.account_number}; nothing changed",
            )


def policy_wire(policy: SettlementPolicyRequest, updated_at: datetime) -> dict[str, Any]:
    """Stored/wire form of a policy."""
    return {
        "schedule": policy.schedule,
        "currency": policy.currency,
        "minimumBalance": fmt(policy.minimum_balance),
        "destinations": [
            {
                "type": d.type,
                "provider": d.provider,
                "accountNumber": d.account_number,
                **({"accountName": d.account_name} if d.account_name is not None else {}),
                "share": format(d.share.normalize(), "f"),
            }
            for d in policy.destinations
        ],
        "updatedAt": iso(updated_at),
    }


def install_policy(
    env: EnvState, raw: dict[str, Any] | SettlementPolicyRequest, now: datetime
) -> dict[str, Any]:
    """Store a (checked) policy and (re)schedule its runs; returns the wire form."""
    policy = raw if isinstance(raw, SettlementPolicyRequest) else SettlementPolicyRequest.model_validate(raw)
    env.settlement_policy = policy_wire(policy, now)
    env.policy_generation += 1
    _schedule_next(env, now)
    return env.settlement_policy


def delete_policy(env: EnvState) -> None:
    """Turn settlement off (scheduled runs stop)."""
    env.settlement_policy = None
    env.policy_generation += 1


def next_slot(schedule: str, after: datetime) -> datetime | None:
    """Next scheduled start: Accra midnight (daily) or Monday midnight (weekly); None for manual."""
    if schedule not in {"daily", "weekly"}:
        return None
    local = after.astimezone(ACCRA)
    day = local.date() + timedelta(days=1)
    if schedule == "weekly":
        while day.weekday() != 0:
            day += timedelta(days=1)
    return datetime.combine(day, time(0, 0), tzinfo=ACCRA)


def _schedule_next(env: EnvState, after: datetime) -> None:
    if env.settlement_policy is None:
        return
    slot = next_slot(env.settlement_policy["schedule"], after)
    if slot is None:
        return
    generation = env.policy_generation
    env.schedule(slot, lambda at: _scheduled_run(env, generation, at))


def _scheduled_run(env: EnvState, generation: int, at: datetime) -> None:
    if generation != env.policy_generation or env.settlement_policy is None:
        return
    run_scheduled(env, at)
    _schedule_next(env, at)


def run_scheduled(env: EnvState, at: datetime, *, raise_errors: bool = False) -> SettlementRun | None:
    """A scheduled run now (also the admin trigger); skipped (or raised) when it cannot be paid out."""
    reference = f"stl-{at.astimezone(ACCRA):%Y%m%d}-{new_id()[:8]}"
    try:
        _check_payable(env)
    except ApiError:
        if raise_errors:
            raise
        return None
    return start_run(env, reference, env.settlement_policy["currency"], at, trigger="scheduled")  # type: ignore[index]


def _check_payable(env: EnvState, currency: str | None = None) -> dict[str, Any]:
    policy = env.settlement_policy
    if policy is None or not env.settlement_nettable:
        raise ApiError(
            422, "policy_not_nettable", "settlement setup cannot be paid out as it stands (no policy)"
        )
    if currency is not None and currency != policy["currency"]:
        raise ApiError(
            422, "policy_not_nettable", f"the settlement policy settles {policy['currency']}, not {currency}"
        )
    for dest in policy["destinations"]:
        if dest["provider"] not in env.providers:
            raise ApiError(
                422,
                "policy_missing_provider",
                f"provider {dest['provider']} of the settlement policy is no longer available",
            )
    return policy


def _split(amount: Decimal, destinations: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Decimal]]:
    parts: list[tuple[dict[str, Any], Decimal]] = []
    left = amount
    for i, dest in enumerate(destinations):
        share = amount if i == len(destinations) - 1 else q(amount * Decimal(dest["share"]) / 100)
        share = min(share, left) if i < len(destinations) - 1 else left
        left -= share
        if share > 0:
            parts.append((dest, share))
    return parts


def start_run(
    env: EnvState,
    reference: str,
    currency: str,
    at: datetime,
    *,
    amount: Decimal | None = None,
    trigger: str = "manual",
    retry_of: str | None = None,
) -> SettlementRun:
    """Reserve the amount, record one settlement payment per destination and schedule completion."""
    policy = _check_payable(env, currency)
    available = env.wallet.available[currency]
    if amount is None:
        amount = max(ZERO, available - Decimal(policy["minimumBalance"]))
    amount = q(min(amount, available))
    run = SettlementRun(
        id=new_id(), reference=reference, currency=currency, started_at=at, trigger=trigger, retry_of=retry_of
    )
    for n, (dest, part) in enumerate(_split(amount, policy["destinations"]), start=1):
        movement = Movement(
            kind="settlement",
            direction="out",
            reference=f"{reference}-{n}",
            amount=part,
            currency=currency,
            status="accepted",
            created_at=at,
            provider=dest["provider"],
            destination={"type": dest["type"], "value": dest["accountNumber"]},
        )
        run.items.append(SettlementItem(destination=dict(dest), amount=part, movement=movement))
    if amount > 0:
        env.wallet.reserve(currency, amount, at, reference)
    for item in run.items:
        env.add_transaction(item.movement)
    run.seq = len(env.settlement_runs) + 1
    env.settlement_runs.append(run)
    env.record_event("settlement.status_changed", at, run.to_wire(with_id=False))
    delay = env.sandbox.settlement_delay_s
    env.schedule(at + timedelta(seconds=delay), lambda done: complete_run(env, run, done))
    return run


def complete_run(env: EnvState, run: SettlementRun, at: datetime) -> None:
    """Finish a run: pay or fail each destination, set the outcome, record the event."""
    for item in run.items:
        m = item.movement
        if str(item.destination["accountNumber"]).endswith(FAILING_SUFFIX):
            env.wallet.release(run.currency, item.amount, at, m.reference)
            item.status, m.status, m.failure_reason = "failed", "failed", "destination_rejected"
        else:
            env.wallet.debit(run.currency, item.amount, at, m.reference)
            item.status, m.status = "settled", "settled"
        m.completed_at = at
        m.reconciliation_status, m.reconciliation_checked_at = "matched", at
    failed = sum(1 for i in run.items if i.status == "failed")
    run.outcome = (
        "settled" if failed == 0 else ("failed_all" if failed == len(run.items) else "failed_partial")
    )
    run.status = "completed"
    run.completed_at = at
    env.record_event("settlement.status_changed", at, run.to_wire(with_id=False))


def find_run(env: EnvState, run_id: str) -> SettlementRun:
    """The run with ``run_id`` (404 otherwise)."""
    for run in env.settlement_runs:
        if run.id == run_id:
            return run
    raise not_found("settlement run")


def settle_now(
    env: EnvState, reference: str, currency: str | None, fp: str, at: datetime
) -> tuple[int, dict[str, Any]]:
    """``POST /v1/settlements``."""
    replay = claim_reference(env, SETTLEMENT_NS, reference, fp)
    if replay is not None:
        return replay
    policy = _check_payable(env, currency)
    run = start_run(env, reference, currency or policy["currency"], at)
    return remember_reference(env, SETTLEMENT_NS, reference, fp, (202, run.to_wire()))


def resettle(env: EnvState, run_id: str, reference: str, fp: str, at: datetime) -> tuple[int, dict[str, Any]]:
    """``POST /v1/settlements/{id}/resettlements`` per the settlement-run table."""
    replay = claim_reference(env, SETTLEMENT_NS, reference, fp)
    if replay is not None:
        return replay
    run = find_run(env, run_id)
    if run.status != "completed" or run.outcome not in {"failed_partial", "failed_all"}:
        raise ApiError(
            409,
            "resettlement_not_allowed",
            "run is not a completed run with outcome failed_partial or failed_all",
        )
    if run.retried_by is not None:
        raise ApiError(409, "settlement_already_retried", f"run was already retried by run {run.retried_by}")
    _check_payable(env, run.currency)
    failed = sum((i.amount for i in run.items if i.status == "failed"), ZERO)
    new = start_run(env, reference, run.currency, at, amount=failed, trigger="resettlement", retry_of=run.id)
    run.retried_by = new.id
    return remember_reference(env, SETTLEMENT_NS, reference, fp, (202, new.to_wire()))
