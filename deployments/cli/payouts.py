"""`payops payouts` and `payops template`: paying a payout sheet from the shell."""

from __future__ import annotations

import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer
from payops.deployments.cli._common import (
    COLUMN,
    CURRENCY,
    EXIT_INVALID,
    REPORTS_DEFAULT,
    cli_settings,
    column_map,
    default_report_dir,
    fail,
    open_cli_database,
    payops_database,
    quiet_prefect,
    refuse_unsafe_sheet,
    run_flow,
    sheet_currency,
)
from payops.deployments.cli.front_door import front_door
from payops.deployments.cli.identity import TOKEN_ENV, CliUser, audit_start, authenticate
from payops.deployments.cli.progress_display import is_terminal, progress_display
from payops.deployments.cli.remote_runs import pay_through_server, retry_through_server
from payops.tasks.payouts.run_summary import PayoutRunSummary
from payops.tasks.runtime.plurals import counted
from typer.core import TyperGroup

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings


class _SheetByDefault(TyperGroup):
    """`payops payouts FILE ...` pays a sheet (the default command ``pay``, which needs no name);
    `payops payouts retry-failed LABEL` retries a run's failed rows.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


DEFAULT_COMMAND = "pay"
app = typer.Typer(
    cls=_SheetByDefault,
    no_args_is_help=True,
    help="Pay a payout sheet (payops payouts FILE [OPTIONS]), or retry a run's failed rows.",
)


def _run_payouts(json_out: bool, approval_threshold: str | None, user: CliUser | None, **fields: Any) -> None:
    """Run the payout flow with these parameters in this process, with the progress display; exit with the
    outcome's code. A run started by ``user`` carries their signed start (the flow's initiator). A payops
    database behind this payops' schema is refused before anything starts (the flow reads its policy
    there)."""
    threshold = _threshold(approval_threshold)
    settings = cli_settings()
    open_cli_database(settings)
    with quiet_prefect(json_out, progress_shown=not json_out and is_terminal(sys.stdout)):
        from payops.flows.payouts import PayoutRunParams, payout_spreadsheet

    params = PayoutRunParams(approval_threshold=threshold, **fields)
    if user is not None:
        audit_start(user, params.label, params.source, dry_run=params.dry_run)

    async def started_and_paid() -> Any:
        if user is not None:
            params.start = await signed_start(settings, params.source, user.name)
        return await payout_spreadsheet(params, return_state=True)

    with progress_display(json_out):
        run_flow(
            started_and_paid,
            json_out,
            PayoutRunSummary,
            "re-run with the same label to finish; nothing is sent twice",
        )


async def signed_start(settings: PayopsSettings, source: str, initiator: str) -> str:
    """The signed start of a run the CLI starts: none. Only the payops server signs (it holds the approval
    key's private half; the CLI will start runs through its API), so a CLI run is unsigned for now: no payops
    initiator, and no holder of Prefect's login may approve it."""
    return ""


def _who(user: str | None, dry_run: bool, action: str) -> CliUser | None:
    """The payops user starting payments; a dry run sends nothing and may go unnamed."""
    if dry_run and not user and cli_settings().api_token is None:
        return None
    return authenticate(user, "upload", action)


def _no_credentials_option(block: str | None) -> None:
    """Through the server, the workers pay with the service credential they hold: a person names none."""
    if block:
        fail(
            "--credentials-block: runs through the payops server pay with the credential its workers hold; "
            "the option is for runs on the server host without a server",
            EXIT_INVALID,
        )


def _credentials_or_refuse(block: str | None) -> None:
    """On this host without a server, the service credential comes from the environment (or ``block``, read
    by the run): without one, refuse at once (exit 2), before anything is claimed or a run is created."""
    if block:
        return
    from payops.tasks.runtime.credentials import CredentialsMissing, settings_from_env

    try:
        settings_from_env()
    except CredentialsMissing as exc:
        fail(f"{exc}; nothing was claimed or sent", EXIT_INVALID)


def _threshold(value: str | None) -> Decimal | None:
    try:
        return Decimal(value) if value else None
    except InvalidOperation:
        fail(f"--approval-threshold must be a decimal amount, got {value!r}", EXIT_INVALID)


REPORT_DIR = typer.Option(None, help=f"Where LABEL.xlsx, LABEL.csv and LABEL.json go ({REPORTS_DEFAULT})")
REQUIRE_APPROVAL = typer.Option(False, "--require-approval", help="Pause for approval before sending")
APPROVAL_THRESHOLD = typer.Option(None, help="Require approval when the total is at least this")
APPROVAL_TIMEOUT = typer.Option(3600, help="Seconds to wait for approval before rejecting")
POLL_DEADLINE = typer.Option(900, help="Seconds to poll for final statuses")
SETTLE_WINDOW = typer.Option(
    60, help="Seconds a payout in review or held is waited for before the run ends (it is followed later)"
)
CREDENTIALS_BLOCK = typer.Option(None, help="PaymentsCredentials block (default: env vars)")
NO_NAME_CHECK = typer.Option(False, "--no-name-check", help="Skip the payee name lookups")
JSON_OUT = typer.Option(False, "--json", help="Print only the JSON summary on stdout")
USER = typer.Option(
    None, "--user", help=f"Your payops user name (an operator; password asked), or set {TOKEN_ENV}"
)


@app.command(DEFAULT_COMMAND)
def payouts(
    file: str = typer.Argument(..., help="Payout sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str | None = REPORT_DIR,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and pre-flight only; send nothing"),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Send the valid rows, report the rest"),
    require_approval: bool = REQUIRE_APPROVAL,
    approval_threshold: str | None = APPROVAL_THRESHOLD,
    approval_timeout: int = APPROVAL_TIMEOUT,
    poll_deadline: float = POLL_DEADLINE,
    credentials_block: str | None = CREDENTIALS_BLOCK,
    no_name_check: bool = NO_NAME_CHECK,
    column: list[str] | None = COLUMN,
    currency: str | None = CURRENCY,
    settle_window: float = SETTLE_WINDOW,
    user: str | None = USER,
    json_out: bool = JSON_OUT,
) -> None:
    """Pay a payout sheet (`payops payouts FILE`): validate, pre-flight, send in batches, poll, report.

    Runs as a named payops user (--user, or PAYOPS_API_TOKEN): the approval policy applies, and that user
    cannot approve the run."""
    from payops.tasks.intake.columns import format_column_map

    mapping = format_column_map(column_map(column))  # a bad --column exits 2 before anything starts
    code = sheet_currency(currency)  # as a bad --currency
    refuse_unsafe_sheet(file, label, json_out)  # before Prefect is imported: answered at once
    _threshold(approval_threshold)  # a bad amount is refused before anything starts
    options = _options(
        require_approval,
        approval_timeout,
        poll_deadline,
        settle_window,
        no_name_check,
        label=label,
        dry_run=dry_run,
        on_invalid_rows="skip" if skip_invalid else "refuse",
        column_map=mapping,
        currency=code,
    )
    with front_door(cli_settings(), user=user) as door:
        if door is not None:
            _no_credentials_option(credentials_block)
            server_options = {**options, "approval_threshold": approval_threshold}
            pay_through_server(door, file, server_options, json_out=json_out, report_dir=report_dir)
    who = _who(user, dry_run, "payops payouts")
    _run_payouts(
        json_out,
        approval_threshold,
        who,
        source=file,
        report_dir=report_dir or default_report_dir(),
        credentials_block=credentials_block,
        **options,
    )


def _options(
    require_approval: bool,
    approval_timeout: int,
    poll_deadline: float,
    settle_window: float,
    no_name_check: bool,
    **more: object,
) -> dict[str, object]:
    """A run's options as the flow's parameters (`PayoutRunParams`) and the server's `RunOptions` name them:
    one dict for a run on this host and one through the server."""
    return {
        "require_approval": require_approval,
        "approval_timeout_s": approval_timeout,
        "poll_deadline_s": poll_deadline,
        "settle_window_s": settle_window,
        "check_names": not no_name_check,
        **more,
    }


@app.command("retry-failed")
def retry_failed(
    label: str = typer.Argument(..., help="The run whose failed and refused rows to pay again"),
    report_dir: str | None = typer.Option(
        None, help=f"Where that run's reports are (and the retry's go) ({REPORTS_DEFAULT})"
    ),
    require_approval: bool = REQUIRE_APPROVAL,
    approval_threshold: str | None = APPROVAL_THRESHOLD,
    approval_timeout: int = APPROVAL_TIMEOUT,
    poll_deadline: float = POLL_DEADLINE,
    credentials_block: str | None = CREDENTIALS_BLOCK,
    no_name_check: bool = NO_NAME_CHECK,
    settle_window: float = SETTLE_WINDOW,
    user: str | None = USER,
    json_out: bool = JSON_OUT,
) -> None:
    """Pay a run's failed and refused rows again, as run LABEL-retry1 (fresh references, same policy); while
    LABEL still runs, the rows that failed so far (LABEL leaves them out of its own resubmit sheet).

    Each row is retried at most once: run again, it retries only rows no retry took yet (as LABEL-retry2,
    ...), replays a retry that was interrupted, and otherwise refuses: nothing is paid twice.
    """
    from payops.store.retries import RetryRows
    from payops.tasks.payouts.fails_again import fails_again_lines
    from payops.tasks.payouts.retry_sheet import RetryRefused, prepare_retry

    _threshold(approval_threshold)  # a bad amount is refused before the retry sheet is written
    options = _options(require_approval, approval_timeout, poll_deadline, settle_window, no_name_check)
    with front_door(cli_settings(), user=user) as door:
        if door is not None:
            _no_credentials_option(credentials_block)
            server_options = {**options, "approval_threshold": approval_threshold}
            retry_through_server(door, label, server_options, json_out=json_out, report_dir=report_dir)
    who = _who(user, False, "payops payouts retry-failed")
    _credentials_or_refuse(credentials_block)  # before any row is claimed for a retry that could not pay
    with payops_database() as engine:
        try:
            sheet = prepare_retry(report_dir or default_report_dir(), label, RetryRows(engine))
        except RetryRefused as exc:
            fail(str(exc), EXIT_INVALID)
        except OSError as exc:
            fail(f"could not write the retry sheet: {exc}")
    if not json_out:
        so_far = " that failed so far (the run goes on)" if sheet.while_running else ""
        what = f"{counted(sheet.rows, 'row')} of {label}{so_far}"
        typer.echo(f"retrying {what} as run {sheet.label} (sheet {sheet.source})")
    for line in fails_again_lines(sheet.fails_again):  # on stderr even with --json: a warning
        typer.echo(line, err=True)
    _run_payouts(
        json_out,
        approval_threshold,
        who,
        source=sheet.source,
        label=sheet.label,
        report_dir=report_dir or default_report_dir(),
        credentials_block=credentials_block,
        column_map=sheet.column_map,  # the retry sheet keeps the run's headers: read it the same way
        currency=sheet.currency or None,  # and its currency
        **options,
    )


@app.command("followup")
def followup(
    label: str = typer.Argument(..., help="The run whose payouts in review or held to read again"),
    report_dir: str | None = typer.Option(None, help=f"Where that run's reports are ({REPORTS_DEFAULT})"),
    credentials_block: str | None = CREDENTIALS_BLOCK,
    json_out: bool = JSON_OUT,
) -> None:
    """Read again the payouts run LABEL left waiting (in review, held); update its JSON summary and run record
    with what moved. The `payout-followup` deployment does this on payment webhooks and hourly."""
    from payops.flows.summaries import FollowupSummary

    with quiet_prefect(json_out):
        from payops.flows.followup import FollowupParams, payout_followup

    params = FollowupParams(
        label=label, report_dir=report_dir or default_report_dir(), credentials_block=credentials_block
    )
    run_flow(
        lambda: payout_followup(params, return_state=True),
        json_out,
        FollowupSummary,
        "run it again: it only reads",
    )


def template(file: Path = typer.Argument(..., help="Where to write the .xlsx template")) -> None:
    """Write a payout sheet template with dropdowns and a text-formatted destination column."""
    from payops.tasks.intake import write_template

    if file.suffix.lower() != ".xlsx":
        fail(f"the template is an .xlsx file; got {file.name!r}", EXIT_INVALID)
    typer.echo(f"template written: {write_template(file)}")
