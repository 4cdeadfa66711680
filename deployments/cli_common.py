"""What every `payops` command shares: exit codes, one-line failures, time options, running a flow."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn

import typer

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_NOT_APPROVED = 0, 1, 2, 3
OUTCOME_EXIT = {
    "completed": EXIT_OK,
    "dry_run": EXIT_OK,
    "invalid_input": EXIT_INVALID,
    "preflight_failed": EXIT_INVALID,
    "not_approved": EXIT_NOT_APPROVED,
}


def quiet_prefect(json_only: bool) -> None:
    """Prefect settings for a local run: no analytics; with --json, only warnings on stderr."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if json_only:
        os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """One clear line on stderr, then the exit code: an operator never sees a traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_time(option: str, value: str | None) -> datetime | None:
    """An ISO 8601 date or date-time option (UTC when it has no offset)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{option} must be an ISO 8601 date or date-time, got {value!r}", EXIT_INVALID)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_flow(call: Callable[[], Any]) -> Any:
    """``asyncio.run(call())`` on a Prefect server: the configured one, ``payops serve``'s, or a temporary
    one this process owns (deployments/prefect_server.py)."""
    from deployments.cli import operator_logging
    from deployments.prefect_server import prefect_api

    operator_logging()
    with prefect_api(say=lambda line: typer.echo(line, err=True)):
        return asyncio.run(call())


def refuse_unsafe_sheet(source: str) -> None:
    """The sheet's safety checks (type, size, zip and dimension bombs), before Prefect is imported or a
    server started: an unsafe or unreadable file is refused in one line (exit 2) within a second or two."""
    from tasks.intake import IntakeError
    from tasks.intake.reading import check_sheet_file

    try:
        check_sheet_file(source)
    except IntakeError as exc:
        fail(str(exc), EXIT_INVALID)


def run_summary_flow(
    call: Callable[[], Any], json_out: bool, summarize: Callable[[dict[str, Any]], str], interrupted: str
) -> NoReturn:
    """Run a flow returning a summary dict; print it (only JSON with --json); exit with its outcome's code."""
    from tasks.intake import IntakeError

    try:
        summary = run_flow(call)
    except IntakeError as exc:
        fail(str(exc), EXIT_INVALID)
    except KeyboardInterrupt:
        fail(f"interrupted: {interrupted}")
    except Exception as exc:  # noqa: BLE001 - operators get one clear line, never a traceback
        fail(f"{type(exc).__name__}: {exc}")
    if json_out:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        typer.echo(summarize(summary))
    raise typer.Exit(OUTCOME_EXIT.get(summary.get("outcome"), EXIT_ERROR))
