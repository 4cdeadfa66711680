"""Approvals in flow tests: the home's approval key pair, the session's approval policy for one test, a run
paused for approval, and decisions taken the way the console and `payops approve` take them
(deployments/approving.decide)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    from payops.store.settings import PayopsSettings

NO_POLICY = "none"  # what the test session states (tests/conftest.py)


@contextmanager
def payops_db() -> Iterator[Engine]:
    """The session's payops database (PAYOPS_HOME / PAYOPS_DATABASE_URL), migrated."""
    from payops.store import PayopsSettings, migrate, upgrade_database

    engine = upgrade_database(PayopsSettings.from_env())
    try:
        migrate(engine)
        yield engine
    finally:
        engine.dispose()


def key_pair() -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    """The approval key pair of the payops home in force (PAYOPS_HOME), made there when missing, loaded as
    the payops server (the private half) and the flows (the public half) load it."""
    from payops.store.settings import PayopsSettings
    from payops.tasks.approval.approval_keys import ensure_key_pair, load_signing_key, load_verify_key

    settings = PayopsSettings.from_env()
    ensure_key_pair(settings.home_dir())
    return load_signing_key(settings), load_verify_key(settings)


@contextmanager
def approval_policy(text: str) -> Iterator[None]:
    """State ``text`` as the approval policy for the block, then "none" again (the session's)."""
    from payops.store.approvals import state_policy

    with payops_db() as engine:
        state_policy(engine, text)
    try:
        yield
    finally:
        with payops_db() as engine:
            state_policy(engine, NO_POLICY)


@contextmanager
def prefect_login_holder(name: str) -> Iterator[None]:
    """An approver ``name`` (added when missing) recorded as holding Prefect's login for the block."""
    from payops.store.users import Users

    with payops_db() as engine:
        users = Users(engine)
        if name not in {u.name for u in users.all()}:
            users.add(name, "approver", "holder-password-0123")
        users.set_prefect_login(name, True)
    try:
        yield
    finally:
        with payops_db() as engine:
            Users(engine).set_prefect_login(name, False)


async def paused_run(name: str, timeout: float = 60) -> tuple[str, str]:
    """(flow run id, the Resume dialog's description) once the run named ``name`` pauses for its input."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    async with get_client() as client:
        for _ in range(int(timeout * 4)):
            runs = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name]))
            )
            state = runs[0].state if runs else None
            if state and state.is_paused() and state.state_details.run_input_keyset:
                key = state.state_details.run_input_keyset["description"]
                try:  # the flow saves its form and description just after pausing
                    raw = await client.read_flow_run_input(runs[0].id, key)
                    return str(runs[0].id), json.loads(raw)
                except (ObjectNotFound, PrefectHTTPStatusError):
                    pass
            await asyncio.sleep(0.25)
    raise AssertionError(f"the run {name} never paused for approval")


async def decide_as(
    run_id: str, user: str, *, approve: bool = True, comment: str = "", acknowledge: list[str] | None = None
) -> str:
    """One approver's decision as the console takes it; every name-check finding acknowledged unless
    ``acknowledge`` says which."""
    from payops.store.settings import PayopsSettings

    with payops_db() as engine:
        return await decide_on(
            engine, PayopsSettings.from_env(), run_id, user, approve=approve, comment=comment,
            acknowledge=acknowledge,
        )  # fmt: skip


async def decide_on(
    engine: Engine,
    settings: PayopsSettings,
    run_id: str,
    user: str,
    *,
    approve: bool = True,
    comment: str = "",
    acknowledge: list[str] | None = None,
) -> str:
    """`decide_as` on a given payops database and settings (a home of the test's own)."""
    from uuid import UUID

    from payops.deployments.approving import decide
    from payops.store.approval_requests import ApprovalRequests
    from payops.tasks.events.auditing import Auditor

    if acknowledge is None:
        request = ApprovalRequests(engine).get(run_id)
        acknowledge = list(request.findings) if request else []
    return await decide(
        engine,
        Auditor(engine, lambda **event: None, key=settings.audit_key_bytes()),
        settings,
        run_id=UUID(run_id),
        user=user,
        role="approver",
        approve=approve,
        reason=comment,
        client="test",
        acknowledged=acknowledge,
    )


def run_paused(
    flow_call: Callable[[], Awaitable[Any]], name: str, then: Callable[[str, str], Awaitable[Any]]
) -> Any:
    """Start ``flow_call`` (a flow run named ``name``), wait until it pauses, await ``then(run_id,
    description)``, and return (run id, description, the flow's final state)."""

    async def scenario() -> Any:
        task = asyncio.create_task(flow_call())
        try:
            run_id, description = await paused_run(name)
        except BaseException:
            task.cancel()
            raise
        await then(run_id, description)
        return run_id, description, await task

    return asyncio.run(scenario())


def prepared_home(
    home: Path, policy: str = NO_POLICY, operator: str | None = "ci-operator"
) -> dict[str, str]:
    """A fresh payops home for processes a test starts (deployments.demo.unattended_home)."""
    from payops.deployments.demo import unattended_home

    return unattended_home(home, policy, operator)


@contextmanager
def approval_emulator(monkeypatch: Any, delivery_delay_s: float = 0.3) -> Iterator[Any]:
    """An emulator for approval tests: its client settings in the environment, and the approval key pair in
    the session's payops home (where the flows find its public half)."""
    from payops.sandbox import SandboxConfig, SandboxServer

    with SandboxServer(SandboxConfig(delivery_delay_s=delivery_delay_s)) as server:
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        key_pair()
        yield server
