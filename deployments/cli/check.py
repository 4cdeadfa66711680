"""`payops check`: the payout intake (rules, located errors, validation report, exit codes), no Prefect."""

from __future__ import annotations

import json
import sys

import typer

from deployments.cli._common import EXIT_INVALID, OUTCOME_EXIT, fail
from deployments.cli.payouts import error_lines


def check(
    file: str = typer.Argument(..., help="Payout sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str = typer.Option("reports", help="Where LABEL-validation.xlsx goes"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Check a payout sheet as `payops payouts` would, at once; nothing is started or sent. Exit 0 valid."""
    from tasks.reports import ReportWouldOverwriteSource
    from tasks.sheet_check import check_sheet

    try:
        summary = check_sheet(file, report_dir, label)
    except ReportWouldOverwriteSource as exc:
        fail(str(exc), EXIT_INVALID)
    except OSError as exc:
        fail(f"could not write the validation report: {exc}")
    if json_out:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        s = summary
        lines = [
            f"sheet {s['label'] or s['source']}: {s['outcome']}",
            f"  rows: {s['rows_total']} ({s['rows_valid']} valid, {s['rows_invalid']} invalid)   "
            f"amount: {s['amount_total']}   time: {s['duration_s']}s",
            *error_lines(s),
            *(f"  report {kind}: {path}" for kind, path in (s.get("report_files") or {}).items()),
        ]
        typer.echo("\n".join(lines))
    raise typer.Exit(OUTCOME_EXIT[summary["outcome"]])
