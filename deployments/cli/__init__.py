"""The `payops` command line: one typer app composed of one module per command group.

Exit codes of flow commands: 0 run completed (failed payouts are a result, not an error), 2 invalid input and
nothing sent, 3 not approved, 1 any other error. Operators never see a traceback: errors are one clear line.
Commands import Prefect only when they run a flow, so the others answer at once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import typer

ENTRIES: tuple[tuple[str, str, str, bool], ...] = (
    ("payouts", "payouts", "app", True),
    ("check", "check", "check", False),
    ("template", "payouts", "template", False),
    ("approve", "users", "approve", False),
    ("purchases", "purchases", "purchases", False),
    ("utilities", "purchases", "purchases", False),  # the former name, hidden
    ("sandbox", "operations", "sandbox", False),
    ("serve", "operations", "serve", False),
    ("console", "operations", "console", False),
    ("settlements", "settlements", "app", True),
    ("events", "events", "app", True),
    ("transactions", "transactions", "app", True),
    ("runs", "runs", "app", True),
    ("users", "users", "users_app", True),
    ("audit", "users", "audit_app", True),
    ("approvals", "users", "approvals_app", True),
    ("alerts", "alerts", "app", True),
    ("webhooks", "webhooks", "app", True),
    ("cache", "cache", "app", True),
    ("reconcile", "reconcile", "app", True),
    ("db", "db", "app", True),
    ("host", "host", "app", True),
    ("login", "login", "login", False),
    ("logout", "login", "logout", False),
)
"""Every command, in the help's order: (name, its module in this package, the typer app or function there,
whether it is a group)."""
HIDDEN = {"utilities"}
NAMES = {entry[0] for entry in ENTRIES}


def _member(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"payops.deployments.cli.{module}"), name)


def _root() -> None:
    """Payout operations on the Payments Service."""
    common = sys.modules.get("payops.deployments.cli._common")
    if common is not None:  # loaded by an earlier command of this process (tests): not this one's settings
        common.forget_settings()


def build_app(only: str | None = None) -> typer.Typer:
    """The `payops` app: every command, or only ``only`` (a command or group name), so a command imports
    its own module and what it needs, not every other command's (`payops payouts` through the server loads
    neither Prefect nor the database layer)."""
    app = typer.Typer(no_args_is_help=True, help="Payout operations on the Payments Service.")
    app.callback()(_root)  # a group even with one command: `payops sandbox` stays a subcommand
    for name, module, attr, group in ENTRIES:
        if only not in (None, name):
            continue
        if group:
            app.add_typer(_member(module, attr), name=name)
        else:
            app.command(name, hidden=name in HIDDEN)(_member(module, attr))
    return app


def _command_of(argv: Sequence[str]) -> str | None:
    """The command or group ``argv`` names (its first word), when it is one; else None (help, a typo)."""
    first = next(iter(argv), None)
    return first if first in NAMES else None


def __getattr__(name: str) -> Any:
    """``app``: the whole app, built on first use (tests and the docs' reference read every command)."""
    if name == "app":
        app = build_app()
        globals()["app"] = app
        return app
    raise AttributeError(name)


def main() -> None:
    """Entry point of the `payops` console script."""
    from payops.tasks.runtime.memory import heap_frozen_for_exit

    try:
        build_app(_command_of(sys.argv[1:]))()
    finally:
        heap_frozen_for_exit()  # the shutdown collections would walk Prefect's whole heap


__all__ = ["app", "build_app", "main"]
