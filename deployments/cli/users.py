"""`payops users ...`, `payops audit verify|list` and `payops approve`: people, the audit trail, approvals.

Passwords are prompted (hidden, twice) on a terminal, or read as one line from stdin when it is not a terminal
(scripts: `echo "$PW" | payops users add ann --role approver`). Every change is audited with the actor
``cli:<os user>``; the Prefect event copy is emitted only when a Prefect API is configured.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from typing import TYPE_CHECKING
from uuid import UUID

import typer
from payops.deployments.cli._common import EXIT_ERROR, EXIT_INVALID, fail

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

users_app = typer.Typer(
    no_args_is_help=True, help="Console users: add, list, disable, enable, reset-password."
)
audit_app = typer.Typer(no_args_is_help=True, help="The audit trail: verify the hash chain, list entries.")


def _engine():  # noqa: ANN202 - sqlalchemy Engine, imported lazily to keep `payops --help` fast
    from payops.deployments.cli._common import cli_settings, open_cli_database

    return open_cli_database(cli_settings())


def _auditor(engine):  # noqa: ANN001, ANN202
    from payops.deployments.cli._common import cli_settings
    from payops.deployments.cli.identity import cli_auditor

    return cli_auditor(engine, cli_settings())


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


def _password(prompt: str = "Password") -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    return typer.prompt(prompt, hide_input=True, confirmation_prompt=True)


def _drain_events() -> None:
    from payops.deployments.cli.identity import drain_events

    drain_events()


@users_app.command("add")
def add_user(
    name: str = typer.Argument(..., help="User name: 2-32 of a-z 0-9 . _ -"),
    role: str = typer.Option(..., "--role", help="operator, approver or admin"),
) -> None:
    """Add a user; the password is prompted (or read from stdin)."""
    from payops.store.users import UserError, Users, check_name, check_role

    engine = _engine()
    try:
        check_name(name)
        check_role(role)
        Users(engine).add(name, role, _password())
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    _auditor(engine).record(_actor(), "user.added", f"user:{name}", role=role)
    _drain_events()
    typer.echo(f"user {name} added ({role})")


@users_app.command("list")
def list_users() -> None:
    """Every user with role and state."""
    from payops.store.users import Users

    for u in Users(_engine()).all():
        state = "disabled" if u.disabled else "active"
        typer.echo(f"{u.name:<32} {u.role:<9} {state:<8} created {u.created_at:%Y-%m-%d}")


def _set_disabled(name: str, disabled: bool) -> None:
    from payops.store.users import UserError, Users

    engine = _engine()
    try:
        Users(engine).set_disabled(name, disabled)
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    _auditor(engine).record(_actor(), "user.disabled" if disabled else "user.enabled", f"user:{name}")
    _drain_events()
    typer.echo(f"user {name} {'disabled; their sessions ended' if disabled else 'enabled'}")


@users_app.command("disable")
def disable_user(name: str) -> None:
    """Disable a user: they cannot log in, and their sessions end at once."""
    _set_disabled(name, True)


@users_app.command("enable")
def enable_user(name: str) -> None:
    """Enable a disabled user again."""
    _set_disabled(name, False)


@users_app.command("reset-password")
def reset_password(name: str) -> None:
    """Set a new password (prompted or from stdin); the user's sessions end at once."""
    from payops.store.users import UserError, Users

    engine = _engine()
    try:
        Users(engine).get(name)
        Users(engine).reset_password(name, _password("New password"))
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    _auditor(engine).record(_actor(), "user.password_reset", f"user:{name}")
    _drain_events()
    typer.echo(f"password of {name} reset; their sessions ended")


def _prefect_copies(settings: PayopsSettings, key: bytes) -> list[tuple[int, str]] | None:
    """The audit chain's copies in the Prefect events of the configured server or the home's running serve;
    None, said on stderr, when there is no such server or it cannot be read (the chain alone is checked)."""
    from payops.deployments.prefect_login import PrefectLoginUnreadable
    from payops.deployments.prefect_server import ServeUnreachable, running_prefect_api
    from payops.store.audit import chain_id
    from payops.tasks.events.auditing import event_copies

    try:
        with running_prefect_api(settings) as api:
            if api is None:
                why = "no Prefect API configured and no payops serve running for this home"
            else:
                return asyncio.run(event_copies(chain_id(key)))
    except (ServeUnreachable, PrefectLoginUnreadable) as exc:  # their messages name no secret
        why = str(exc)
    except Exception as exc:  # noqa: BLE001 - the chain is still checked; say why the copies were not
        why = type(exc).__name__
    typer.echo(f"Prefect events not compared ({why}): only the chain is checked", err=True)
    return None


@audit_app.command("verify")
def audit_verify() -> None:
    """Check the keyed hash chain, and each entry against its copy in Prefect's events when there is a
    Prefect server (the configured one, else the home's running `payops serve`; none is started for this):
    exit 0 when intact, 1 with every edited or deleted entry named."""
    from payops.deployments.cli._common import cli_settings
    from payops.store.audit import verify

    settings = cli_settings()
    key = settings.audit_key_bytes()
    copies = _prefect_copies(settings, key)
    verdict = verify(_engine(), copies, key=key)
    if verdict.ok:
        compared = f"; {len(set(copies))} compared with their Prefect events" if copies is not None else ""
        typer.echo(f"audit trail intact: {verdict.entries} entries{compared}")
        return
    for problem in verdict.problems:
        typer.echo(f"audit trail broken: {problem}", err=True)
    raise typer.Exit(EXIT_ERROR)


@audit_app.command("list")
def audit_list(
    actor: str | None = typer.Option(None, help="Only this user"),
    action: str | None = typer.Option(None, help="Action prefix, e.g. payops.run"),
    limit: int = typer.Option(50, min=1),
) -> None:
    """The newest entries, tab-separated."""
    from payops.store.audit import search

    for e in search(_engine(), actor=actor, action=action, limit=limit):
        typer.echo(
            f"{e.seq}\t{e.at:%Y-%m-%d %H:%M:%S}\t{e.actor}\t{e.client}\t{e.action}\t{e.object}\t{e.detail}"
        )


@users_app.command("token")
def issue_token(
    name: str = typer.Argument(..., help="The user the token acts as"),
    label: str = typer.Option("cli", "--name", help="What the token is for (shown in `payops users tokens`)"),
) -> None:
    """Issue a API token, printed once: `PAYOPS_API_TOKEN=<token> payops payouts ...` runs as NAME."""
    from payops.store.users import UserError, Users

    engine = _engine()
    try:
        token = Users(engine).issue_token(name, label)
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    _auditor(engine).record(_actor(), "token.issued", f"user:{name}", "cli", name=label)
    _drain_events()
    typer.echo(token)
    typer.echo(f"API token for {name} ({label}): keep it secret; an admin revokes it with", err=True)
    typer.echo("  payops users revoke-token ID   (IDs: payops users tokens)", err=True)


@users_app.command("tokens")
def list_tokens(name: str | None = typer.Argument(None, help="Only this user's tokens")) -> None:
    """Every API token: id, user, what for, its first characters, created, last used, revoked."""
    from payops.store.users import Users

    for t in Users(_engine()).tokens(name):
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
        state = "revoked" if t.revoked else "active"
        typer.echo(
            f"{t.id:<5} {t.user:<32} {t.name:<16} {t.prefix}…  created {t.created_at:%Y-%m-%d}"
            f"  used {used}  {state}"
        )


@users_app.command("revoke-token")
def revoke_token(token_id: int = typer.Argument(..., help="The token's id (payops users tokens)")) -> None:
    """Revoke an API token for good: the CLI refuses it from now on."""
    from payops.store.users import UserError, Users

    engine = _engine()
    try:
        info = Users(engine).revoke_token(token_id)
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    _auditor(engine).record(_actor(), "token.revoked", f"user:{info.user}", "cli", token=token_id)
    _drain_events()
    typer.echo(f"token {token_id} of {info.user} ({info.name}) revoked")


def _paused_run(name_or_id: str) -> UUID:
    """The flow run id itself, or the newest paused payout run of that name (label, else sheet name)."""
    from payops.deployments.run_history import find_payout_runs

    try:
        return UUID(name_or_id)
    except ValueError:
        pass
    try:
        found = asyncio.run(find_payout_runs(name_or_id))
    except Exception as exc:  # noqa: BLE001 - one clear line for the operator
        fail(f"could not look up the run {name_or_id!r}: {type(exc).__name__}: {exc}")
    if not found:
        fail(f"no payout run with name, label or id {name_or_id!r}", EXIT_INVALID)
    paused = [r for r in found if r.state in ("Paused", "Suspended")]
    if not paused:
        fail(f"no run named {name_or_id!r} waits for approval (the newest is {found[0].state})", EXIT_INVALID)
    return UUID(paused[0].id)


def approve(
    flow_run_id: str = typer.Argument(
        ..., help="The paused payout run: its flow run id, or its name (label, else the sheet's name)"
    ),
    user: str = typer.Option(..., "--user", help="Your user name (an approver); the password is asked"),
    reject: bool = typer.Option(False, "--reject", help="Reject instead of approving"),
    comment: str = typer.Option("", help="Why (required to reject)"),
    acknowledge: list[str] = typer.Option(
        [],
        "--acknowledge",
        help="A name-check finding you have looked at: mismatch, partial, unverified, no_name_column "
        "(repeat for each the run has; `payops runs show` lists them)",
    ),
) -> None:
    """Approve (or reject) a payout run waiting for approval, as a named approver.

    The approval is signed over the run's rows and totals with the approval key and stored; the run resumes
    once it has every approval the policy asks (the flow checks the signatures again).
    """
    from payops.deployments.approving import DecisionError, decide
    from payops.deployments.cli._common import cli_settings
    from payops.deployments.cli.identity import read_password
    from payops.deployments.prefect_server import prefect_api
    from payops.store.users import Users
    from payops.tasks.approval.approvals import ApprovalKeyMissing, load_approval_key

    settings = cli_settings()
    with prefect_api(settings, say=lambda line: typer.echo(line, err=True)):  # the home's serve, else one
        run_id = _paused_run(flow_run_id)
        try:
            asyncio.run(load_approval_key(settings))  # before the password: without a key, nothing is signed
        except ApprovalKeyMissing as exc:
            fail(str(exc))
        engine = _engine()
        auditor = _auditor(engine)
        account = Users(engine).authenticate(user, read_password())
        if account is None:
            auditor.record(user, "login.failed", f"user:{user}", "cli")
            _drain_events()
            fail("wrong user name or password (or the user is disabled)", EXIT_INVALID)
        try:
            message = asyncio.run(
                decide(
                    engine,
                    auditor,
                    settings,
                    run_id=run_id,
                    user=account.name,
                    role=account.role,
                    approve=not reject,
                    reason=comment,
                    client="cli",
                    acknowledged=acknowledge,
                )
            )
        except DecisionError as exc:
            fail(exc.message, EXIT_INVALID)
        except ApprovalKeyMissing as exc:
            fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - one clear line for the operator
            fail(f"could not record the decision on {flow_run_id}: {type(exc).__name__}: {exc}")
        finally:
            _drain_events()
    typer.echo(message)


approvals_app = typer.Typer(no_args_is_help=True, help="The approval policy every payout run is held to.")


@approvals_app.command("policy")
def policy(
    set_to: str | None = typer.Option(
        None,
        "--set",
        help="New policy, e.g. 'GHS 1000:1, 100000:2; 0:1' (per currency FROM_TOTAL:APPROVERS; a group "
        "without a currency applies to every other one), or 'none'",
    ),
) -> None:
    """Show the approval policy in force, or set it (audited). It applies to every run, whatever starts it."""
    from payops.store.approvals import Approvals, parse_policy
    from payops.store.users import UserError

    engine = _engine()
    approvals = Approvals(engine)
    if set_to is not None:
        try:
            new = parse_policy(set_to)
        except UserError as exc:
            fail(str(exc), EXIT_INVALID)
        approvals.set_policy(new)
        _auditor(engine).record(_actor(), "rules.changed", "rules:approval", "cli", policy=new.describe())
        _drain_events()
    current = approvals.policy()
    typer.echo(f"approval policy: {current.describe()}")
    typer.echo(f"  as text: {current.to_text()}")
