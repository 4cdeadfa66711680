"""`payops users ...`, `payops audit verify|list`, `payops approvals policy` and `payops approve`: people, the
audit trail, approvals, through the payops server.

Each command calls the server's API as the person running it (`front_door`: `payops login`, a personal token,
or ``--user NAME`` and the password); the server checks the role (admin for users, tokens, the policy and the
audit trail; approver for decisions), signs decisions with its key and audits every change with the
authenticated user as the actor. Without a server these commands refuse, naming `payops host ...` where a
host command exists. Passwords are prompted (hidden, twice for a new one) on a terminal, or read as one line
from stdin (scripts: `echo "$PW" | payops users add ann --role approver`).
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import quote

import typer
from payops.deployments.cli._common import EXIT_ERROR, cli_settings
from payops.deployments.cli.front_door import FrontDoor, ask, server_only

users_app = typer.Typer(
    no_args_is_help=True,
    help="Users and their API tokens, through the payops server (admins): add, list, disable, enable, "
    "reset-password, token, tokens, revoke-token, prefect-login.",
)
audit_app = typer.Typer(no_args_is_help=True, help="The audit trail: verify the hash chain, list entries.")
approvals_app = typer.Typer(no_args_is_help=True, help="The approval policy every payout run is held to.")

FIRST_ADMIN = "payops host create-admin NAME"


def new_password(prompt: str = "Password") -> str:
    """A new password: prompted twice (hidden) on a terminal, else one line from stdin."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    return typer.prompt(prompt, hide_input=True, confirmation_prompt=True)


def _admin(call: str, method: str, path: str, **kwargs: Any) -> Any:
    """One admin call through the server (an admin's token or login)."""
    with server_only(cli_settings(), local=FIRST_ADMIN if call == "add" else "") as door:
        return ask(door, method, path, **kwargs)


def _user(name: str) -> str:
    return quote(name, safe="")


@users_app.command("add")
def add_user(
    name: str = typer.Argument(..., help="User name: 2-32 of a-z 0-9 . _ -"),
    role: str = typer.Option(..., "--role", help="operator, approver or admin"),
) -> None:
    """Add a user; the password is prompted (or read from stdin). Admins only."""
    with server_only(cli_settings(), local=FIRST_ADMIN) as door:
        ask(door, "POST", "/users", json={"name": name, "role": role, "password": new_password()})
    typer.echo(f"user {name} added ({role})")


@users_app.command("list")
def list_users() -> None:
    """Every user with role and state (and who holds Prefect's login)."""
    for u in _admin("list", "GET", "/users"):
        state = "disabled" if u["disabled"] else "active"
        prefect = "  holds Prefect's login" if u.get("prefect_login") else ""
        typer.echo(f"{u['name']:<32} {u['role']:<9} {state:<8} created {u['created_at'][:10]}{prefect}")


@users_app.command("disable")
def disable_user(name: str) -> None:
    """Disable a user: they cannot log in, their sessions and tokens stop at once."""
    typer.echo(_admin("disable", "POST", f"/users/{_user(name)}/disable")["message"])


@users_app.command("enable")
def enable_user(name: str) -> None:
    """Enable a disabled user again."""
    typer.echo(_admin("enable", "POST", f"/users/{_user(name)}/enable")["message"])


@users_app.command("reset-password")
def reset_password(name: str) -> None:
    """Set a new password (prompted or from stdin); the user's sessions end at once."""
    body = {"password": new_password("New password")}
    typer.echo(_admin("password", "POST", f"/users/{_user(name)}/password", json=body)["message"])


@users_app.command("prefect-login")
def prefect_login(
    name: str,
    revoke: bool = typer.Option(False, "--revoke", help="They no longer hold it (the login was changed)"),
) -> None:
    """Record that NAME holds Prefect's login (or no longer does): they may then not approve a run created on
    Prefect directly, which has no server-signed start."""
    body = {"holds": not revoke}
    typer.echo(_admin("prefect-login", "POST", f"/users/{_user(name)}/prefect-login", json=body)["message"])


@users_app.command("token")
def issue_token(
    name: str = typer.Argument(..., help="The user the token acts as"),
    label: str = typer.Option("cli", "--name", help="What the token is for (shown in `payops users tokens`)"),
) -> None:
    """Issue an API token, printed once: `PAYOPS_API_TOKEN=<token> payops payouts ...` runs as NAME."""
    issued = _admin("token", "POST", f"/users/{_user(name)}/tokens", json={"purpose": label})
    typer.echo(issued["token"])
    typer.echo(f"API token for {name} ({label}): keep it secret; an admin revokes it with", err=True)
    typer.echo("  payops users revoke-token ID   (IDs: payops users tokens)", err=True)


@users_app.command("tokens")
def list_tokens(name: str | None = typer.Argument(None, help="Only this user's tokens")) -> None:
    """Every API token: id, user, what for, its first characters, created, last used, revoked."""
    for t in _admin("tokens", "GET", "/tokens", params={"user": name} if name else None):
        used = t["last_used_at"][:16].replace("T", " ") if t["last_used_at"] else "never"
        state = "revoked" if t["revoked"] else "active"
        typer.echo(
            f"{t['id']:<5} {t['user']:<32} {t['purpose']:<16} {t['prefix']}…  created {t['created_at'][:10]}"
            f"  used {used}  {state}"
        )


@users_app.command("revoke-token")
def revoke_token(token_id: int = typer.Argument(..., help="The token's id (payops users tokens)")) -> None:
    """Revoke an API token for good: the server refuses it from now on."""
    typer.echo(_admin("revoke", "DELETE", f"/tokens/{token_id}")["message"])


@audit_app.command("verify")
def audit_verify() -> None:
    """Check the keyed hash chain, and each entry against its copy in Prefect's events: exit 0 when intact,
    1 with every edited or deleted entry named. Through the server (admins); on a host without one,
    locally."""
    from payops.deployments.cli.front_door import front_door

    with front_door(cli_settings()) as door:
        if door is None:
            from payops.deployments.cli.audit_local import verify_locally

            verify_locally()
            return
        verdict = ask(door, "GET", "/audit/verify")
    if verdict.get("note"):
        typer.echo(verdict["note"], err=True)
    if verdict["ok"]:
        compared = verdict.get("compared")
        with_copies = f"; {compared} compared with their Prefect events" if compared is not None else ""
        typer.echo(f"audit trail intact: {verdict['entries']} entries{with_copies}")
        return
    for problem in verdict["problems"]:
        typer.echo(f"audit trail broken: {problem}", err=True)
    raise typer.Exit(EXIT_ERROR)


@audit_app.command("list")
def audit_list(
    actor: str | None = typer.Option(None, help="Only this user"),
    action: str | None = typer.Option(None, help="Action prefix, e.g. payops.run"),
    limit: int = typer.Option(50, min=1),
) -> None:
    """The newest entries, tab-separated. Through the server (admins); on a host without one, locally."""
    from payops.deployments.cli.front_door import front_door

    query = {k: v for k, v in {"actor": actor, "action": action, "limit": limit}.items() if v is not None}
    with front_door(cli_settings()) as door:
        if door is None:
            from payops.deployments.cli.audit_local import entries_locally

            entries = entries_locally(actor, action, limit)
        else:
            entries = ask(door, "GET", "/audit", params=query)
    for e in entries:
        at = e["at"][:19].replace("T", " ")
        typer.echo(
            f"{e['seq']}\t{at}\t{e['actor']}\t{e['client']}\t{e['action']}\t{e['object']}\t{e['detail']}"
        )


def approve(
    flow_run_id: str = typer.Argument(
        ..., help="The paused payout run: its flow run id, or its name (label, else the sheet's name)"
    ),
    user: str | None = typer.Option(
        None, "--user", help="Your user name (an approver; the password is asked), else your login or token"
    ),
    reject: bool = typer.Option(False, "--reject", help="Reject instead of approving"),
    comment: str = typer.Option("", help="Why (required to reject)"),
    acknowledge: list[str] = typer.Option(
        [],
        "--acknowledge",
        help="A finding you have looked at: mismatch, partial, unverified, no_name_column (name checks), "
        "paid_before (rows another run paid lately: approving pays them again); repeat for each the run has "
        "(`payops runs show` lists them)",
    ),
) -> None:
    """Approve (or reject) a payout run waiting for approval, as a named approver, through the payops server.

    The server signs the approval over the run's rows and totals with its key and stores it; the run resumes
    once it has every approval the policy asks (the flow checks the signatures again).
    """
    body = {"decision": "reject" if reject else "approve", "comment": comment, "acknowledge": acknowledge}
    with server_only(cli_settings(), user=user) as door:
        said = _decide(door, flow_run_id, body)
    typer.echo(said["message"])


def _decide(door: FrontDoor, run: str, body: dict[str, Any]) -> Any:
    return ask(door, "POST", f"/runs/{quote(run, safe='')}/approval", json=body)


@approvals_app.command("policy")
def policy(
    set_to: str | None = typer.Option(
        None,
        "--set",
        help="New policy, e.g. 'GHS 1000:1, 100000:2; 0:1' (per currency FROM_TOTAL:APPROVERS; a group "
        "without a currency applies to every other one), or 'none'. Admins only",
    ),
) -> None:
    """Show the approval policy in force, or set it (admins; audited). It applies to every run, whatever
    starts it."""
    with server_only(cli_settings(), local="payops host policy --set POLICY (an emergency)") as door:
        if set_to is not None:
            current = ask(door, "PUT", "/approval-policy", json={"policy": set_to})
        else:
            current = ask(door, "GET", "/approval-policy")
    typer.echo(f"approval policy: {current['policy']}")
    typer.echo(f"  as text: {current['text']}")
