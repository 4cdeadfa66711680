"""`payops serve` (local all-in-one) and `payops console` (the operations console alone)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the operations commands to the `payops` CLI."""

    @app.command()
    def serve(
        sandbox: bool = typer.Option(False, "--sandbox", help="Also run the Payments Service emulator"),
        port: int = typer.Option(4200, help="Prefect server port (API and UI), when one is started"),
        console_port: int = typer.Option(8400, help="Console port"),
        sandbox_port: int = typer.Option(8800, help="Emulator port (with --sandbox)"),
    ) -> None:
        """Local all-in-one: Prefect server, every deployment with its schedule, the console (and emulator).

        A Prefect server is started unless PREFECT_API_URL is configured. Everything binds 127.0.0.1;
        Ctrl-C stops everything.
        """
        from deployments.serve import run_all_in_one

        raise typer.Exit(
            run_all_in_one(port=port, console_port=console_port, sandbox=sandbox, sandbox_port=sandbox_port)
        )

    @app.command()
    def console(
        host: str = typer.Option("127.0.0.1", help="Address to bind"),
        port: int = typer.Option(8400, help="Port to bind"),
    ) -> None:
        """Serve the operations console (upload page, runs, webhook receiver) on the configured Prefect API.

        Settings: PAYOPS_CONSOLE_PASSWORD (required to log in), PAYOPS_PAYOUT_DEPLOYMENT (unset: runs execute
        inside the console process), PAYOPS_UPLOAD_URL, PAYOPS_REPORT_URL, PAYOPS_WEBHOOK_SECRETS.
        """
        from deployments.console.__main__ import main

        main(["--host", host, "--port", str(port)])
