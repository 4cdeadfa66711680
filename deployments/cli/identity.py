"""Who runs a `payops` command that starts payments: a named payops user, by password or personal API token.

`payops payouts` and `payops payouts retry-failed` start runs as that user: the start is audited
(``payops.run.started``, client ``cli``) and signed with the approval key, so the flow records the user as
the run's initiator and never counts them among its approvers. A dry run sends nothing and needs no name.

* ``--user NAME``: the password is asked (hidden) on a terminal, else read as one line from stdin;
* ``PAYOPS_API_TOKEN``: a personal token (`payops users token NAME`), revocable by an admin.
"""

from __future__ import annotations

import getpass
import sys
from dataclasses import dataclass

from payops.deployments.cli._common import EXIT_INVALID, fail

TOKEN_ENV = "PAYOPS_API_TOKEN"
WHO = f"name yourself with --user NAME (your password is asked) or {TOKEN_ENV} (see `payops users token`)"


@dataclass(frozen=True)
class CliUser:
    name: str
    role: str
    how: str  # "password" or "token"


def read_password(prompt: str = "Password: ") -> str:
    """A password: hidden prompt on a terminal, else one line from stdin (scripts)."""
    if sys.stdin.isatty():
        return getpass.getpass(prompt)
    return sys.stdin.readline().rstrip("\r\n")


def authenticate(user: str | None, permission: str, action: str) -> CliUser:
    """The payops user running this command, allowed ``permission``; a clear one-line refusal otherwise
    (audited as ``login.failed`` or ``access.denied``)."""
    from payops.deployments.cli._common import cli_settings, payops_database
    from payops.store.users import PERMISSIONS, Users

    settings = cli_settings()
    token = settings.api_token.get_secret_value().strip() if settings.api_token else ""
    if not user and not token:
        fail(f"{action} needs to know who you are: {WHO}", EXIT_INVALID)
    with payops_database(settings) as engine:
        users, auditor = Users(engine), cli_auditor(engine, settings)
        if user:
            account, how = users.authenticate(user, read_password()), "password"
        else:
            account, how = users.authenticate_token(token), "token"
        if account is None:
            who = user or "API token"
            auditor.record(who, "login.failed", f"user:{who}", "cli", via=how)
            drain_events()
            fail(
                f"wrong user name or password, or an unknown, revoked or disabled token ({WHO})", EXIT_INVALID
            )
        if account.role not in PERMISSIONS[permission]:
            auditor.record(account.name, "access.denied", f"cli:{action}", "cli", role=account.role)
            drain_events()
            allowed = " or ".join(sorted(PERMISSIONS[permission]))
            fail(f"{account.name} is {account.role}; {action} needs the role {allowed}", EXIT_INVALID)
        return CliUser(account.name, account.role, how)


def audit_start(user: CliUser, label: str | None, source: str, **detail: object) -> None:
    """``payops.run.started`` by ``user`` from the CLI (the flow run's id is in its own audit entries)."""
    from payops.deployments.cli._common import cli_settings, payops_database

    settings = cli_settings()
    with payops_database(settings) as engine:
        cli_auditor(engine, settings).record(
            user.name, "run.started", f"label:{label or source}", "cli", source=source, via=user.how, **detail
        )
    drain_events()


_emitted: list[bool] = []


def cli_auditor(engine, settings):  # noqa: ANN001, ANN201 - Engine, PayopsSettings, Auditor: lazy imports
    """An auditor for CLI commands (the chain's key from ``settings``): the row always, its Prefect event
    copy when a Prefect API is set."""
    from payops.tasks.events.auditing import Auditor

    def emit(**event: object) -> None:
        from prefect.settings import PREFECT_API_URL

        if PREFECT_API_URL.value():
            from prefect.events import emit_event

            emit_event(**event)
            _emitted.append(True)

    return Auditor(engine, emit, key=settings.audit_key_bytes())


def drain_events() -> None:
    """Send the queued Prefect events before the command goes on or exits."""
    if _emitted:
        from prefect.events.worker import EventsWorker

        EventsWorker.drain_all()
        _emitted.clear()
