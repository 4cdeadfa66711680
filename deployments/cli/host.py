"""`payops host ...`: bootstrap and recovery on the server host, without the server.

These are the only commands that write the payops database directly: creating an admin (the first one, or
one to recover from a lock-out) and an emergency change of the approval policy (`payops db upgrade` is the
third). They need what the host's admin holds: write access to the payops home (its database, keys and
audit key). Each is audited with the host account (``host:<uid>``, from the operating system, never from an
environment variable) and says that it ran locally. Everything else a person does goes through the server
(`payops login`; docs/operations.md, *Who holds what*).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer
from payops.deployments.cli._common import EXIT_INVALID, cli_settings, fail
from payops.store.home import host_actor

app = typer.Typer(
    no_args_is_help=True,
    help="Bootstrap and recovery on the server host (needs write access to the payops home; audited as "
    "host:<uid>): the first admin, an emergency approval policy.",
)


def writable_home() -> Path:
    """The payops home, when this account may write it (its keys and database); else one line, exit 2."""
    settings = cli_settings()
    home = settings.home.expanduser()
    database = home / "payops.sqlite3"
    refusal = f"a host command needs write access to the payops home {home}: run it as the server's account"
    try:
        settings.home_dir()  # a new home is made (0700) where this account may
    except OSError:
        fail(refusal)
    if not os.access(home, os.W_OK | os.X_OK):
        fail(refusal)
    if settings.database_url is None and database.exists() and not os.access(database, os.W_OK):
        fail(f"a host command needs write access to {database}: run it as the server's account")
    return home


def audit_locally(action: str, obj: str, **detail: object) -> None:
    from payops.deployments.cli._common import payops_database
    from payops.deployments.cli.identity import cli_auditor, drain_events

    settings = cli_settings()
    with payops_database(settings) as engine:
        cli_auditor(engine, settings).record(host_actor(), action, obj, "host", local=True, **detail)
    drain_events()


@app.command("create-admin")
def create_admin(name: str = typer.Argument(..., help="User name: 2-32 of a-z 0-9 . _ -")) -> None:
    """Create an admin in this host's payops database (the first one, or to recover from a lock-out); the
    password is prompted (or read from stdin)."""
    from payops.deployments.cli._common import payops_database
    from payops.deployments.cli.users import new_password
    from payops.store.users import UserError, Users

    writable_home()
    with payops_database() as engine:
        try:
            Users(engine).add(name, "admin", new_password())
        except UserError as exc:
            fail(str(exc), EXIT_INVALID)
    audit_locally("user.added", f"user:{name}", role="admin")
    typer.echo(f"admin {name} created locally, audited as {host_actor()}")


@app.command("policy")
def emergency_policy(
    set_to: str = typer.Option(
        ..., "--set", help="The new policy, as `payops approvals policy --set` takes it, or 'none'"
    ),
) -> None:
    """Set the approval policy locally, without the server (an emergency: the server is down or no admin can
    log in). Audited as host:<uid>; the server's admins see it in the audit trail."""
    from payops.deployments.cli._common import payops_database
    from payops.store.approvals import Approvals, parse_policy
    from payops.store.users import UserError

    writable_home()
    try:
        new = parse_policy(set_to)
    except UserError as exc:
        fail(str(exc), EXIT_INVALID)
    with payops_database() as engine:
        Approvals(engine).set_policy(new)
    audit_locally("rules.changed", "rules:approval", policy=new.describe(), emergency=True)
    typer.echo(f"approval policy set locally, audited as {host_actor()}: {new.describe()}")
