"""`payops alerts apply|test`: alert automations on the Prefect server, sent through a notification block."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from payops.deployments.cli._common import EXIT_INVALID, cli_settings, fail, quiet_prefect, run_on_server

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

app = typer.Typer(
    no_args_is_help=True, help="Alerts: Prefect automations sending payops events to a channel."
)

BLOCK_HELP = "Notification block: NAME or TYPE/NAME (e.g. slack-webhook/ops); default PAYOPS_ALERTS_BLOCK"


def _block(block: str | None, settings: PayopsSettings) -> str:
    chosen = block or settings.alerts_block
    if not chosen:
        fail("name a notification block with --block or PAYOPS_ALERTS_BLOCK", EXIT_INVALID)
    return chosen


@app.command("apply")
def apply(
    block: str | None = typer.Option(None, "--block", help=BLOCK_HELP),
    console_url: str | None = typer.Option(
        None, help="Console address for run links (default PAYOPS_CONSOLE_URL or http://127.0.0.1:8400)"
    ),
) -> None:
    """Create or update every automation of deployments/automations/ (re-applying never duplicates)."""
    with quiet_prefect(True):
        from payops.deployments.alerts import AlertSetupError, apply_automations, load_recovery_automations

    settings = cli_settings()
    chosen = _block(block, settings)
    try:
        done = run_on_server(lambda: apply_automations(chosen, settings, console=console_url), settings)
    except AlertSetupError as exc:
        fail(str(exc), EXIT_INVALID)
    except Exception as exc:  # noqa: BLE001 - operators get one clear line, never a traceback
        fail(f"{type(exc).__name__}: {exc}")
    for name, action in done:
        typer.echo(f"{action}: {name}")
    recovery = {a.name for a in load_recovery_automations()}
    told = [name for name, _ in done if name not in recovery]
    gone = len(done) - len(told)
    typer.echo(f"{len(told)} automations notify through {chosen}; {gone} recover runs a dead host left")


@app.command("test")
def test(block: str | None = typer.Option(None, "--block", help=BLOCK_HELP)) -> None:
    """Send a test message through the notification block."""
    with quiet_prefect(True):
        from payops.deployments.alerts import AlertSetupError, send_test

    settings = cli_settings()
    chosen = _block(block, settings)
    try:
        full_name = run_on_server(lambda: send_test(chosen), settings)
    except AlertSetupError as exc:
        fail(str(exc), EXIT_INVALID)
    except Exception as exc:  # noqa: BLE001 - operators get one clear line, never a traceback
        fail(f"sending through {chosen} failed: {type(exc).__name__}: {exc}")
    typer.echo(f"test message sent through {full_name}")
