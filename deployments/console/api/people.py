"""Who is calling, logging in and out of the CLI, and what admins manage through the API: users, their
personal tokens, the approval policy and the audit trail (with its verification)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request
from payops.store.approvals import ApprovalPolicy, parse_policy
from payops.store.audit import chain_id, search, verify
from payops.store.users import User, UserError

from ..deps import ConsoleDep
from ..state import Console
from .auth import ApiAdmin, ApiCaller, ApiViewer
from .errors import ApiError
from .models import (
    AuditEntryOut,
    AuditVerdict,
    IssuedToken,
    LoginRequest,
    Me,
    NewPassword,
    NewUser,
    PolicyOut,
    PolicyRequest,
    PrefectLogin,
    Said,
    TokenOut,
    TokenRequest,
    UserOut,
    VerifyKey,
)

router = APIRouter(tags=["people"])


def _refused(exc: UserError) -> ApiError:
    return ApiError(422, str(exc))


@router.get("/me", response_model=Me)
async def me(account: ApiCaller) -> Me:
    """The caller's name and role."""
    return Me(name=account.name, role=account.role)


@router.post("/login", status_code=201, response_model=IssuedToken)
async def login(request: Request, console: ConsoleDep, account: ApiCaller, body: LoginRequest) -> IssuedToken:
    """A personal API token for the caller (who authenticates with name and password): `payops login`
    keeps it in the user's own config."""
    token = await asyncio.to_thread(console.users.issue_token, account.name, body.purpose)
    console.audit(request, account.name, "login", f"user:{account.name}", via="api", token=body.purpose)
    return IssuedToken(token=token, user=account.name, role=account.role)


@router.post("/logout", response_model=Said)
async def logout(request: Request, console: ConsoleDep, account: ApiCaller) -> Said:
    """Revoke the token this call carries (`payops logout`)."""
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        raise ApiError(400, "log out with the token to revoke (Authorization: Bearer)")
    info = await asyncio.to_thread(console.users.revoke_token_value, token.strip())
    console.audit(request, account.name, "logout", f"user:{account.name}", via="api", token=info.id)
    return Said(message=f"token {info.id} of {info.user} revoked")


@router.get("/approval-key", response_model=VerifyKey)
async def approval_key(console: ConsoleDep, account: ApiViewer) -> VerifyKey:
    """The public half of the key the server signs starts and approvals with (workers verify with it)."""
    from payops.tasks.approval.approval_keys import ApprovalKeyMissing, load_verify_key, verify_key_pem

    try:
        key = await asyncio.to_thread(load_verify_key, console.settings)
    except ApprovalKeyMissing as exc:
        raise ApiError(503, str(exc)) from None
    return VerifyKey(pem=verify_key_pem(key))


# -- users and tokens ------------------------------------------------------------------------------------
def _user_out(user: User) -> UserOut:
    return UserOut(
        name=user.name,
        role=user.role,
        disabled=bool(user.disabled),
        prefect_login=bool(user.prefect_login),
        created_at=user.created_at.isoformat(),
    )


@router.get("/users", response_model=list[UserOut])
async def users(console: ConsoleDep, admin: ApiAdmin) -> list[UserOut]:
    return [_user_out(u) for u in await asyncio.to_thread(console.users.all)]


@router.post("/users", status_code=201, response_model=UserOut)
async def add_user(request: Request, console: ConsoleDep, admin: ApiAdmin, body: NewUser) -> UserOut:
    name = body.name.strip().lower()
    try:
        user = await asyncio.to_thread(console.users.add, name, body.role, body.password)
    except UserError as exc:
        raise _refused(exc) from None
    console.audit(request, admin.name, "user.added", f"user:{name}", role=body.role, via="api")
    return _user_out(user)


async def _change(
    request: Request, console: Console, admin: str, name: str, action: str, call: Callable[[], object]
) -> None:
    """Run one change of a user (``call``, blocking) and audit it; a refusal is one line."""
    try:
        await asyncio.to_thread(call)
    except UserError as exc:
        raise _refused(exc) from None
    console.audit(request, admin, action, f"user:{name}", via="api")


@router.post("/users/{name}/disable", response_model=Said)
async def disable(request: Request, name: str, console: ConsoleDep, admin: ApiAdmin) -> Said:
    if name == admin.name:
        raise ApiError(422, "you cannot disable your own account")
    await _change(
        request, console, admin.name, name, "user.disabled", lambda: console.users.set_disabled(name, True)
    )
    return Said(message=f"user {name} disabled; their sessions ended")


@router.post("/users/{name}/enable", response_model=Said)
async def enable(request: Request, name: str, console: ConsoleDep, admin: ApiAdmin) -> Said:
    await _change(
        request, console, admin.name, name, "user.enabled", lambda: console.users.set_disabled(name, False)
    )
    return Said(message=f"user {name} enabled")


@router.post("/users/{name}/password", response_model=Said)
async def password(
    request: Request, name: str, console: ConsoleDep, admin: ApiAdmin, body: NewPassword
) -> Said:
    await _change(
        request,
        console,
        admin.name,
        name,
        "user.password_reset",
        lambda: (console.users.get(name), console.users.reset_password(name, body.password)),
    )
    return Said(message=f"password of {name} reset; their sessions ended")


@router.post("/users/{name}/prefect-login", response_model=Said)
async def prefect_login(
    request: Request, name: str, console: ConsoleDep, admin: ApiAdmin, body: PrefectLogin
) -> Said:
    """Record that a user holds (or no longer holds) Prefect's login: such a user may not approve a run
    created on Prefect directly, which carries no server-signed start."""
    action = "user.prefect_login_granted" if body.holds else "user.prefect_login_revoked"
    await _change(
        request, console, admin.name, name, action, lambda: console.users.set_prefect_login(name, body.holds)
    )
    holds = "holds" if body.holds else "no longer holds"
    return Said(message=f"{name} {holds} Prefect's login")


@router.post("/users/{name}/tokens", status_code=201, response_model=IssuedToken)
async def issue_token(
    request: Request, name: str, console: ConsoleDep, admin: ApiAdmin, body: TokenRequest
) -> IssuedToken:
    try:
        token = await asyncio.to_thread(console.users.issue_token, name, body.purpose)
    except UserError as exc:
        raise _refused(exc) from None
    console.audit(request, admin.name, "token.issued", f"user:{name}", name=body.purpose, via="api")
    return IssuedToken(token=token, user=name)


@router.get("/tokens", response_model=list[TokenOut])
async def tokens(console: ConsoleDep, admin: ApiAdmin, user: str | None = None) -> list[TokenOut]:
    found = await asyncio.to_thread(console.users.tokens, user)
    return [
        TokenOut(
            id=t.id,
            user=t.user,
            purpose=t.name,
            prefix=t.prefix,
            created_at=t.created_at.isoformat(),
            last_used_at=t.last_used_at.isoformat() if t.last_used_at else None,
            revoked=t.revoked,
        )
        for t in found
    ]


@router.delete("/tokens/{token_id}", response_model=Said)
async def revoke_token(request: Request, token_id: int, console: ConsoleDep, admin: ApiAdmin) -> Said:
    try:
        info = await asyncio.to_thread(console.users.revoke_token, token_id)
    except UserError as exc:
        raise ApiError(404, str(exc)) from None
    console.audit(request, admin.name, "token.revoked", f"user:{info.user}", token=token_id, via="api")
    return Said(message=f"token {token_id} of {info.user} ({info.name}) revoked")


# -- the approval policy ---------------------------------------------------------------------------------
def _policy_out(policy: ApprovalPolicy) -> PolicyOut:
    return PolicyOut(policy=policy.describe(), text=policy.to_text())


@router.get("/approval-policy", response_model=PolicyOut)
async def get_policy(console: ConsoleDep, account: ApiViewer) -> PolicyOut:
    """The approval policy every payout run is held to."""
    return _policy_out(await asyncio.to_thread(console.approvals.policy))


@router.put("/approval-policy", response_model=PolicyOut)
async def set_policy(
    request: Request, console: ConsoleDep, admin: ApiAdmin, body: PolicyRequest
) -> PolicyOut:
    try:
        policy = parse_policy(body.policy)
    except UserError as exc:
        raise _refused(exc) from None
    await asyncio.to_thread(console.approvals.set_policy, policy)
    console.audit(request, admin.name, "rules.changed", "rules:approval", policy=policy.describe(), via="api")
    return _policy_out(await asyncio.to_thread(console.approvals.policy))


# -- the audit trail -------------------------------------------------------------------------------------
@router.get("/audit", response_model=list[AuditEntryOut])
async def audit(
    console: ConsoleDep,
    admin: ApiAdmin,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 50,
) -> list[AuditEntryOut]:
    """The newest audit entries (filter by actor and action prefix)."""
    entries = await asyncio.to_thread(search, console.engine, actor=actor, action=action, limit=limit)
    return [
        AuditEntryOut(
            seq=e.seq,
            at=e.at.isoformat(),
            actor=e.actor,
            client=e.client,
            action=e.action,
            object=e.object,
            detail=e.detail,
        )
        for e in entries
    ]


@router.get("/audit/verify", response_model=AuditVerdict)
async def audit_verify(console: ConsoleDep, admin: ApiAdmin) -> AuditVerdict:
    """The audit chain checked on the server with its key, and each entry against its copy in Prefect's
    events (the server reaches its Prefect server with its own login)."""
    from payops.tasks.events.auditing import event_copies

    key = console.settings.audit_key_bytes()
    copies: list[tuple[int, str]] | None
    note = None
    try:
        copies = await event_copies(chain_id(key))
    except Exception as exc:  # noqa: BLE001 - the chain is still checked; the answer says why copies were not
        copies, note = None, f"Prefect events not compared ({type(exc).__name__}): only the chain is checked"
    verdict = await asyncio.to_thread(verify, console.engine, copies, key=key)
    compared = len(set(copies)) if copies is not None else None
    return AuditVerdict(
        ok=verdict.ok, entries=verdict.entries, compared=compared, problems=verdict.problems, note=note
    )
