"""``/_sandbox/...``: test and operator controls (not part of the spec, left out of the OpenAPI document)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from ..auth import mint_token
from ..clock import ManualClock, iso
from ..engine import platform
from ..engine.settlements import run_scheduled
from ..errors import ApiError, not_found
from ..idempotency import json_response
from ..records import ALL_PERMISSIONS
from ..runtime import Sandbox, get_sandbox
from ..seed import parse_limits
from ..state import PROVIDERS, EnvState

router = APIRouter(prefix="/_sandbox", include_in_schema=False)


def _env(sandbox: Sandbox, business: str, environment: str) -> EnvState:
    env = sandbox.state.envs.get((business, environment))
    if env is None:
        raise not_found(f"business {business} ({environment})")
    return env


class Advance(BaseModel):
    seconds: float = Field(ge=0)


@router.get("/clock")
async def read_clock(request: Request) -> Response:
    """Current emulator time and clock kind."""
    sandbox = get_sandbox(request)
    return json_response(
        200, {"now": iso(sandbox.clock.now()), "manual": isinstance(sandbox.clock, ManualClock)}
    )


@router.post("/clock/advance")
async def advance_clock(request: Request, body: Advance) -> Response:
    """Move a ManualClock forward and run everything that became due (409 with a system clock)."""
    sandbox = get_sandbox(request)
    if not isinstance(sandbox.clock, ManualClock):
        raise ApiError(409, "clock_not_manual", "the emulator runs on the system clock")
    sandbox.clock.advance(body.seconds)
    sandbox.state.advance_all()
    return json_response(200, {"now": iso(sandbox.clock.now())})


@router.get("/stats")
async def stats(request: Request) -> Response:
    """Payout counts, ledger totals (with a balance check) and request counts by endpoint."""
    sandbox = get_sandbox(request)
    state = sandbox.state
    state.advance_all()
    with state.lock:
        businesses: dict[str, Any] = {}
        for (biz, environment), env in sorted(state.envs.items()):
            statuses: dict[str, int] = {}
            for p in env.payouts.values():
                statuses[p.status] = statuses.get(p.status, 0) + 1
            businesses.setdefault(biz, {})[environment] = {
                "payouts": len(env.payouts),
                "payoutStatuses": statuses,
                "settlementRuns": len(env.settlement_runs),
                "events": len(env.events),
                "ledger": env.wallet.totals(),
                "balanced": env.wallet.balanced(),
            }
        return json_response(
            200,
            {
                "now": iso(sandbox.clock.now()),
                "businesses": businesses,
                "requests": dict(sorted(state.requests.items())),
            },
        )


class BusinessStatus(BaseModel):
    status: Literal["active", "suspended", "deactivated"]


@router.post("/businesses/{business}/status")
async def set_business_status(request: Request, business: str, body: BusinessStatus) -> Response:
    """Suspend, deactivate or reactivate a business."""
    state = get_sandbox(request).state
    if business not in state.businesses:
        raise not_found(f"business {business}")
    state.businesses[business].status = body.status
    return json_response(200, {"id": business, "status": body.status})


class LimitsUpdate(BaseModel):
    limits: dict[str, dict[str, str]] | None = None
    unusable: bool | None = None


@router.put("/businesses/{business}/{environment}/limits")
async def set_limits(request: Request, business: str, environment: str, body: LimitsUpdate) -> Response:
    """Replace the limits (``{}`` = none: payments refused with limits_missing) or mark them unusable."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        if body.limits is not None:
            try:
                env.limits.limits = parse_limits(body.limits)
            except (KeyError, ArithmeticError) as exc:
                raise ApiError(400, "invalid_input", f"limits: {exc}") from None
        if body.unusable is not None:
            env.limits.unusable = body.unusable
    return json_response(
        200, {"items": env.limits.to_wire(sandbox.clock.now()), "unusable": env.limits.unusable}
    )


class EnvFlags(BaseModel):
    providers: list[str] | None = None
    settlement_nettable: bool | None = Field(default=None, alias="settlementNettable")


@router.patch("/businesses/{business}/{environment}")
async def set_env_flags(request: Request, business: str, environment: str, body: EnvFlags) -> Response:
    """Change the providers usable by the account and whether settlements can be netted."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        if body.providers is not None:
            unknown = sorted(set(body.providers) - set(PROVIDERS))
            if unknown:
                raise ApiError(400, "invalid_input", f"providers: unknown {unknown}")
            env.providers = set(body.providers)
        if body.settlement_nettable is not None:
            env.settlement_nettable = body.settlement_nettable
    return json_response(
        200, {"providers": sorted(env.providers), "settlementNettable": env.settlement_nettable}
    )


class Funding(BaseModel):
    currency: str = "GHS"
    amount: str


@router.post("/businesses/{business}/{environment}/wallet/fund")
async def fund_wallet(request: Request, business: str, environment: str, body: Funding) -> Response:
    """Credit the wallet (money enters from outside)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    amount = Decimal(body.amount)
    if amount <= 0:
        raise ApiError(400, "invalid_input", "amount: must be positive")
    with sandbox.state.lock:
        env.wallet.credit(body.currency, amount, sandbox.clock.now(), "sandbox-funding")
    return json_response(200, env.wallet.to_wire())


@router.post("/businesses/{business}/{environment}/settlements/run")
async def trigger_settlement(request: Request, business: str, environment: str) -> Response:
    """Start a scheduled settlement run now (422 policy_not_nettable/policy_missing_provider if it cannot)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        run = run_scheduled(env, sandbox.clock.now(), raise_errors=True)
    if run is None:
        raise ApiError(422, "policy_not_nettable", "settlement setup cannot be paid out as it stands")
    return json_response(202, run.to_wire())


class TokenRequest(BaseModel):
    business: str = "demo"
    environment: Literal["test", "live"] = "test"
    permissions: list[str] = Field(default_factory=lambda: sorted(ALL_PERMISSIONS))
    typ: Literal["client", "user"] = "client"
    ttl_s: int | None = Field(default=None, alias="ttlS")
    client_id: str = Field(default="sandbox-minted", alias="clientId")


@router.post("/tokens")
async def mint(request: Request, body: Annotated[TokenRequest, Body()]) -> Response:
    """Mint any token (a signed-in user's, a short-lived one, narrow permissions) for tests."""
    sandbox = get_sandbox(request)
    if body.business not in sandbox.state.businesses:
        raise not_found(f"business {body.business}")
    token, ttl = mint_token(
        sandbox,
        client_id=body.client_id,
        business_id=body.business,
        environment=body.environment,
        permissions=body.permissions,
        typ=body.typ,
        ttl_s=body.ttl_s,
    )
    return json_response(200, {"access_token": token, "token_type": "Bearer", "expires_in": ttl})


class ReconciliationUpdate(BaseModel):
    status: Literal["unchecked", "matched", "mismatched"]


@router.post("/businesses/{business}/{environment}/payouts/{reference}/reconciliation")
async def set_payout_reconciliation(
    request: Request, business: str, environment: str, reference: str, body: ReconciliationUpdate
) -> Response:
    """The platform's reconciliation result on a payout (``mismatched``, or ``unchecked`` again)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        payout = platform.set_reconciliation(env, reference, body.status, sandbox.clock.now())
    return json_response(200, payout.to_wire())


@router.post("/businesses/{business}/{environment}/payouts/{reference}/refund")
async def refund_payout(request: Request, business: str, environment: str, reference: str) -> Response:
    """A late refund of a delivered payout: a reversal movement with ``parent``/``compensation`` lineage."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        reversal = platform.reverse_payout(env, reference, sandbox.clock.now())
    return json_response(200, reversal.to_transaction())


class PayoutAdjustment(BaseModel):
    fee: Decimal | None = Field(default=None, ge=0, decimal_places=2)
    amount: Decimal | None = Field(default=None, gt=0, decimal_places=2)


@router.post("/businesses/{business}/{environment}/payouts/{reference}/adjust")
async def adjust_payout(
    request: Request, business: str, environment: str, reference: str, body: PayoutAdjustment
) -> Response:
    """The platform records another fee and/or amount on a payout; the wallet follows the difference."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        payout = platform.adjust(env, reference, sandbox.clock.now(), fee=body.fee, amount=body.amount)
    return json_response(200, payout.to_wire())


class OutsideMovement(BaseModel):
    kind: Literal["payout", "collection"]
    reference: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    amount: Decimal = Field(gt=0, decimal_places=2)
    currency: str = "GHS"


@router.post("/businesses/{business}/{environment}/movements")
async def record_outside_movement(
    request: Request, business: str, environment: str, body: OutsideMovement
) -> Response:
    """A payout or collection made outside the API (the service's dashboard), final at once."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        movement = platform.outside_movement(
            env, body.kind, body.reference, body.amount, body.currency, sandbox.clock.now()
        )
    return json_response(200, movement.to_transaction())
