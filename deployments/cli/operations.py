"""`payops serve` (local all-in-one), `payops console` (the operations console alone), `payops sandbox`."""

from __future__ import annotations

from pathlib import Path

import typer
from payops.deployments.cli._common import operator_logging


def serve(
    sandbox: bool = typer.Option(False, "--sandbox", help="Also run the Payments Service emulator"),
    port: int | None = typer.Option(
        None, help="Prefect server port (API and UI), when one is started; default: a free one"
    ),
    console_port: int | None = typer.Option(None, help="Console port; default: a free one"),
    sandbox_port: int | None = typer.Option(None, help="Emulator port (with --sandbox); default: a free one"),
) -> None:
    """Local all-in-one for this payops home: Prefect server, every deployment with its schedule, the console
    (and emulator).

    A Prefect server is started unless PREFECT_API_URL is configured. Everything binds 127.0.0.1, on free
    ports (the home's previous ones when free); where everything is gets printed and recorded in the home
    (PAYOPS_HOME/serve.json), where every payops command of this home finds it. Ctrl-C stops everything.
    """
    from payops.deployments.serve import run_all_in_one

    operator_logging()

    raise typer.Exit(
        run_all_in_one(port=port, console_port=console_port, sandbox=sandbox, sandbox_port=sandbox_port)
    )


def console(
    host: str = typer.Option("127.0.0.1", help="Address to bind"),
    port: int = typer.Option(8400, help="Port to bind"),
) -> None:
    """Serve the operations console and the payops server's API (upload page, runs, approvals, webhook
    receiver, /api/v1) on the configured Prefect API: the front door people use.

    The first admin comes from `payops host create-admin NAME` on this host; settings: PAYOPS_DATABASE_URL
    (users, audit, the webhook inbox), PAYOPS_APPROVAL_SIGNING_KEY_FILE (the key it signs with; default the
    home's approval-signing-key.pem), PAYOPS_PAYOUT_DEPLOYMENT (unset: runs execute inside the console
    process), PAYOPS_UPLOAD_URL, PAYOPS_REPORT_URL, PAYOPS_WEBHOOK_SECRETS, PAYOPS_WEBHOOK_FORWARD,
    PAYOPS_CONSOLE_TRUSTED_PROXIES, and Prefect's PREFECT_API_URL and PREFECT_API_AUTH_STRING (see
    docs/operations.md).
    """
    from payops.deployments.console.__main__ import main

    operator_logging()

    main(["--host", host, "--port", str(port)])


def sandbox(
    host: str = typer.Option("127.0.0.1", help="Address to bind"),
    port: int = typer.Option(8800, help="Port to bind"),
    env_file: Path | None = typer.Option(None, help="Also write the client settings as export lines here"),
    seed: Path | None = typer.Option(None, help="JSON file of businesses to load"),
    rate_limit: float | None = typer.Option(None, help="Requests per second per credential (default: off)"),
    fault_rate: float = typer.Option(0.0, help="Fraction of API requests answered 5xx"),
    token_ttl: int = typer.Option(300, help="Access token lifetime in seconds"),
    delivery_delay: float = typer.Option(2.0, help="Seconds for a payout to reach its final status"),
    latency_ms: int = typer.Option(0, min=0, help="Added latency per API request (a network round trip)"),
    allow_local_webhooks: bool = typer.Option(
        False, help="Allow webhook endpoints on 127.0.0.1 (local work)"
    ),
    history: int = typer.Option(
        0, min=0, max=2_000_000, help="Delivered payouts of the day before (a service with a past)"
    ),
) -> None:
    """Serve the Payments Service emulator and print the settings a client needs."""
    from payops.sandbox.cli import run_sandbox

    run_sandbox(
        host=host,
        port=port,
        env_file=env_file,
        seed=seed,
        rate_limit=rate_limit,
        fault_rate=fault_rate,
        token_ttl=token_ttl,
        delivery_delay=delivery_delay,
        latency_ms=latency_ms,
        allow_local_webhooks=allow_local_webhooks,
        history=history,
    )
