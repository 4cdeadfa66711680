"""The `payops` command line: one typer app composed of one module per command group.

Exit codes of flow commands: 0 run completed (failed payouts are a result, not an error), 2 invalid input and
nothing sent, 3 not approved, 1 any other error. Operators never see a traceback: errors are one clear line.
Commands import Prefect only when they run a flow, so the others answer at once.
"""

from __future__ import annotations

import typer
from payops.deployments.cli import (
    alerts,
    cache,
    check,
    db,
    events,
    host,
    login,
    operations,
    payouts,
    purchases,
    reconcile,
    runs,
    settlements,
    transactions,
    users,
    webhooks,
)

app = typer.Typer(no_args_is_help=True, help="Payout operations on the Payments Service.")
app.add_typer(payouts.app, name="payouts")
app.command("check")(check.check)
app.command("template")(payouts.template)
app.command("approve")(users.approve)
app.command("purchases")(purchases.purchases)
app.command("utilities", hidden=True)(purchases.purchases)  # the former name
app.command("sandbox")(operations.sandbox)
app.command("serve")(operations.serve)
app.command("console")(operations.console)
app.add_typer(settlements.app, name="settlements")
app.add_typer(events.app, name="events")
app.add_typer(transactions.app, name="transactions")
app.add_typer(runs.app, name="runs")
app.add_typer(users.users_app, name="users")
app.add_typer(users.audit_app, name="audit")
app.add_typer(users.approvals_app, name="approvals")
app.add_typer(alerts.app, name="alerts")
app.add_typer(webhooks.app, name="webhooks")
app.add_typer(cache.app, name="cache")
app.add_typer(reconcile.app, name="reconcile")
app.add_typer(db.app, name="db")
app.add_typer(host.app, name="host")
app.command("login")(login.login)
app.command("logout")(login.logout)


def main() -> None:
    """Entry point of the `payops` console script."""
    from payops.tasks.runtime.memory import heap_frozen_for_exit

    try:
        app()
    finally:
        heap_frozen_for_exit()  # the shutdown collections would walk Prefect's whole heap


__all__ = ["app", "main"]
