"""What every `payops` command shares: exit codes, one-line failures and logs, time options, the one flow
runner."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings
    from sqlalchemy import Engine

from payops.tasks.runtime.run_summary import EXIT_ERROR, EXIT_INVALID, EXIT_NOT_APPROVED, EXIT_OK, RunSummary

__all__ = [
    "EXIT_ERROR",
    "EXIT_INVALID",
    "EXIT_NOT_APPROVED",
    "EXIT_OK",
    "fail",
    "operator_logging",
    "parse_time",
    "quiet_prefect",
    "run_flow",
    "validation_message",
]


@contextmanager
def quiet_prefect(json_only: bool, progress_shown: bool = False) -> Iterator[None]:
    """Load Prefect for a local run, then the block's own imports (the flow's modules): no analytics, one
    line per log record; with --json, only warnings. With a live progress display, the terminal shows
    warnings and errors only (the Prefect UI keeps them all).

    The cyclic collector is paused for these imports (`tasks.runtime.memory.gc_paused`): the objects they
    build live as long as the process, and the collections they would trigger find nothing to free
    (docs/performance.md, *Starting a command*).
    """
    from payops.tasks.runtime.memory import gc_paused

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if json_only:
        os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
    with gc_paused():
        operator_logging(logging.WARNING if progress_shown else None)
        yield


class _OneLine(logging.Formatter):
    """Terminal log lines without tracebacks: an operator reads one line per problem. The API log handler is
    untouched, so the full traceback stays in the flow run's logs in the Prefect UI."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def operator_logging(level: int | None = None) -> None:
    """Make every terminal log handler (Prefect's console handler included) print one line per record
    (and only records of at least ``level`` when given)."""
    import prefect.main  # noqa: F401 - sets up Prefect's handlers (later setups are incremental), then wrapped

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            stream = getattr(handler, "stream", None)
            if stream not in (sys.stderr, sys.stdout):
                continue
            if not isinstance(handler.formatter, _OneLine):
                handler.setFormatter(_OneLine(handler.formatter))
            if level is not None:
                handler.setLevel(max(handler.level, level))


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


def refuse_unsafe_sheet(source: str, label: str | None, json_out: bool) -> None:
    """The sheet's safety checks (type, size, zip and dimension bombs), before Prefect is imported or a
    server started: an unsafe or unreadable file is refused at once with exit 2, in one line on stderr, or
    with ``--json`` as the run's JSON summary (outcome ``invalid_input``, the refusal in ``errors``)."""
    from payops.tasks.intake import IntakeError
    from payops.tasks.intake.reading import check_sheet_file
    from payops.tasks.runtime.run_meter import RunMeter

    meter = RunMeter()
    try:
        check_sheet_file(source)
    except IntakeError as exc:
        if not json_out:
            fail(str(exc), EXIT_INVALID)
        from payops.tasks.payouts.run_summary import PayoutRunSummary
        from payops.tasks.runtime.run_outcomes import Outcome

        # the flow's own refusal (`tasks.payouts.sheet_check.refusal_summary`, with the meter's figures): the
        # same model and fields whichever entry point refused the file
        summary = PayoutRunSummary.head(source, label, errors=exc.errors(), outcome=Outcome.INVALID_INPUT)
        meter.phase("read_validate")
        meter.into(summary)
        sys.stdout.write(json.dumps(summary.as_json(), default=str) + "\n")
        raise typer.Exit(EXIT_INVALID) from None


def run_on_server(call: Callable[[], Any], settings: PayopsSettings | None = None) -> Any:
    """``asyncio.run(call())`` on a Prefect server: the configured one, the ``payops serve`` of the
    settings' home (default: this command's settings), or a temporary one this process owns and that dies
    with it (deployments/prefect_server.py)."""
    from payops.deployments.prefect_server import prefect_api

    with prefect_api(settings or cli_settings(), say=lambda line: typer.echo(line, err=True)):
        return asyncio.run(call())


def run_flow(
    call: Callable[[], Any], json_out: bool, summary_type: type[RunSummary], interrupted: str
) -> NoReturn:
    """Run a flow to its final state (``call`` passes ``return_state=True``); print the run summary the state
    carries (`flows.outcomes.run_summary`; only its JSON with --json) and exit with its outcome's code. A
    failed state exits 1 with its message."""
    from payops.tasks.intake import IntakeError
    from prefect.states import State

    try:
        state = run_on_server(call)
        data = state.result(raise_on_failure=False) if isinstance(state, State) else state
    except IntakeError as exc:
        fail(str(exc), EXIT_INVALID)
    except KeyboardInterrupt:
        fail(f"interrupted: {interrupted}")
    except Exception as exc:  # noqa: BLE001 - operators get one clear line, never a traceback
        fail(f"{type(exc).__name__}: {exc}")
    summary = data if isinstance(data, summary_type) else None
    if summary is not None:
        if json_out:
            sys.stdout.write(json.dumps(summary.as_json(), default=str) + "\n")
        else:
            typer.echo(summary.text())
    if isinstance(state, State) and state.is_failed():
        detail = state.message or (
            f"{type(data).__name__}: {data}" if isinstance(data, BaseException) else ""
        )
        fail(detail or "the flow run failed")
    raise typer.Exit(summary.exit_code if summary is not None else EXIT_ERROR)


def validation_message(exc: Exception) -> str:
    """A pydantic ValidationError as one line: ``field: problem; ...``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in errors())
    return str(exc)


REPORTS_DEFAULT = "default: PAYOPS_REPORT_URL, else the reports folder under the payops home"

COLUMN = typer.Option(
    None,
    "--column",
    help='Which column holds a field when payops does not know its header: "Full Name=payee_name" '
    "(repeat for several; fields: reference, amount, currency, provider, destination_type, destination, "
    "payee_name, note)",
)


CURRENCY = typer.Option(
    None,
    "--currency",
    help="The sheet's currency when it has no currency column and its amount header names none, e.g. GHS "
    "(also for blank currency cells); a header naming another currency refuses the sheet",
)


def sheet_currency(value: str | None) -> str | None:
    """The ``--currency`` option as a code (``ghs`` → ``GHS``); anything but three letters exits 2."""
    import re

    if value is None or not value.strip():
        return None
    code = value.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        fail(f"--currency must be a three-letter currency code such as GHS, got {value!r}", EXIT_INVALID)
    return code


def column_map(entries: list[str] | None) -> dict[str, str]:
    """The ``--column`` options as one ``{header: field}`` mapping; a bad entry exits 2 naming it."""
    from payops.tasks.intake.columns import ColumnMapError, parse_column_map

    try:
        return parse_column_map("\n".join(entries or []))
    except ColumnMapError as exc:
        fail(f"--column: {exc}", EXIT_INVALID)


_SETTINGS: list[PayopsSettings] = []
"""This command's settings once read (`cli_settings`); the root callback forgets them (`forget_settings`)."""


def cli_settings() -> PayopsSettings:
    """payops' settings for this command: read from the environment at its first call, the same object
    after; a bad ``PAYOPS_*`` value exits 2 naming the variable."""
    from payops.store.settings import PayopsSettings, SettingsError

    if not _SETTINGS:
        try:
            _SETTINGS.append(PayopsSettings.from_env())
        except SettingsError as exc:
            fail(str(exc), EXIT_INVALID)
    return _SETTINGS[0]


def forget_settings() -> None:
    """A new command starts (the app's root callback): its settings are read afresh. One process runs
    several commands only in tests (typer's runner), each with an environment of its own."""
    _SETTINGS.clear()


def default_report_dir() -> str:
    """Where a command's reports go when ``--report-dir`` is not given (`PayopsSettings.reports`)."""
    return cli_settings().reports


DATABASE_SETTING = "PAYOPS_DATABASE_URL (or PAYOPS_HOME for the default SQLite file)"


def open_cli_database(settings: PayopsSettings, setting: str = DATABASE_SETTING) -> Engine:
    """The process's engine on the settings' database, its schema checked (`store.open_database`). A
    database behind this payops' schema exits 2 with one line naming it and `payops db upgrade`; any other
    database error is one line naming ``setting``; the error's own text is never shown, because
    SQLAlchemy's messages can carry the URL and its password."""
    from payops.store import SchemaBehind, open_database
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return open_database(settings)
    except SchemaBehind as exc:
        fail(str(exc), EXIT_INVALID)
    except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:  # a malformed URL, a missing driver
        fail(f"cannot open the payops database ({type(exc).__name__}); check {setting}")


@contextmanager
def payops_database(
    settings: PayopsSettings | None = None, *, setting: str = DATABASE_SETTING
) -> Iterator[Engine]:
    """The payops database for one command (:func:`open_cli_database`; ``settings`` default: this
    command's); an error while it is used is one line naming ``setting``."""
    from sqlalchemy.exc import SQLAlchemyError

    engine = open_cli_database(settings or cli_settings(), setting)
    try:
        yield engine
    except SQLAlchemyError as exc:
        fail(f"the payops database did not answer ({type(exc).__name__}); check {setting}")
