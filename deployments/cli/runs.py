"""`payops runs` and `payops runs show`: recent payout runs and their outcomes, read from Prefect."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer
from payops.deployments.cli._common import cli_settings, fail, run_on_server
from payops.deployments.cli.front_door import ask, front_door
from payops.tasks.reports.money_moved import moved_lines
from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money_text

app = typer.Typer(help="Recent payout runs: state, totals by status, approval, reports.")


def _totals(r: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in r.payouts_by_status.items()) or "-"


def _line(r: Any) -> str:
    """One run: start, its id (what `payops approve` takes), the outcome as the run page names it (the final
    state: Completed with failures, Not approved...), its name, totals."""
    return f"{r.start or '-':23}  {r.id}  {r.state:24}  {r.name}  payouts: {_totals(r)}"


def _read(call: Callable[[], Any]) -> Any:
    """Await ``call()`` on this home's Prefect server (its `payops serve`'s, else a temporary one)."""
    try:
        return run_on_server(call)
    except Exception as exc:  # noqa: BLE001 - one clear line for the operator
        fail(f"could not read runs from the Prefect server ({type(exc).__name__}: {exc}); is it running?")


@app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    limit: int = typer.Option(20, min=1, max=200, help="How many runs, newest first"),
    json_out: bool = typer.Option(False, "--json", help="Print only JSON on stdout"),
) -> None:
    """List recent payout runs (newest first) from the Prefect server."""
    if ctx.invoked_subcommand is not None:
        return
    from payops.deployments.run_history import RunRecord, recent_payout_runs

    with front_door(cli_settings()) as door:
        if door is not None:
            records = [RunRecord(**r) for r in ask(door, "GET", "/runs", params={"limit": limit})]
        else:
            records = _read(lambda: recent_payout_runs(limit))
    if json_out:
        sys.stdout.write(json.dumps([r.as_dict() for r in records], default=str) + "\n")
        return
    if not records:
        typer.echo("no payout runs yet")
        return
    for r in records:
        typer.echo(_line(r))


def _attention(report_files: dict[str, str]) -> list[dict[str, Any]]:
    """The rows needing a person, from the run's JSON report when it is a readable local file."""
    path = Path(report_files.get("json", ""))
    if not report_files.get("json") or not path.is_file():
        return []
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("attention_rows") or []
    except (OSError, ValueError):
        return []


def _approval_lines(record: Any, waiting: dict[str, Any]) -> list[str]:
    """A run waiting for approval: what it needs, who may not give it, the findings to acknowledge."""
    others = f" (not {', '.join(waiting['excluded'])})" if waiting["excluded"] else ""
    lines = [
        f"  waiting for approval: {waiting['still_needed']} more of {waiting['required']}{others}; "
        f"{waiting['started']}; until {waiting['deadline'][:16].replace('T', ' ')} UTC",
    ]
    if waiting["approvers"]:
        lines.append(f"  approved so far by: {', '.join(waiting['approvers'])}")
    lines += [f"  paid before: {said}" for said in waiting.get("paid_before") or []]
    for kind, rows in waiting["findings"].items():
        where = f" (rows {', '.join(map(str, rows[:10]))}{'…' if len(rows) > 10 else ''})" if rows else ""
        lines.append(f"  to acknowledge: {kind}{where}   (payops approve {record.id} --acknowledge {kind})")
    return lines


@app.command("show")
def show(
    run: str = typer.Argument(..., help="A run's name (its label, else its sheet's name) or flow run id"),
    json_out: bool = typer.Option(False, "--json", help="Print only JSON on stdout"),
) -> None:
    """One payout run (the newest of that name): state, outcome, totals, approval, the rows needing a person,
    report files."""
    from payops.deployments.run_history import RunRecord, find_payout_runs

    with front_door(cli_settings()) as door:
        if door is not None:
            one = ask(door, "GET", f"/runs/{quote(run, safe='')}")
            record, others = RunRecord(**one["record"]), one["others"]
            attention = (one.get("summary") or {}).get("attention_rows") or []
            waiting = one.get("approval")
        else:
            found = _read(lambda: find_payout_runs(run))
            if not found:
                fail(f"no payout run with name, label or id {run!r}")
            record, others = found[0], [r.id for r in found[1:]]
            attention, waiting = _attention(record.report_files), None
    if json_out:
        shown = {**record.as_dict(), "attention_rows": attention, "others": others}
        sys.stdout.write(json.dumps(shown, default=str) + "\n")
        return
    label = f", label {record.label}" if record.label not in (None, record.name) else ""
    if record.rows_total is None and waiting:  # no summary before it is decided: what it asks approval for
        to_pay = ", ".join(money_text(v, cur) for cur, v in (waiting.get("totals") or {}).items())
        totals = [f"  rows: {waiting.get('rows', 0)}   to pay: {to_pay or '-'}"]
    elif record.moved:
        totals = [f"  rows: {record.rows_total}   sheet total: {record.amount_total}"]
        totals += [f"  {line}" for line in moved_lines(record.moved)]
    else:
        totals = [f"  rows: {record.rows_total}   amount: {record.amount_total}   fees: {record.fee_total}"]
    lines = [
        f"run {record.name} ({record.id}){label}",
        f"  state: {record.state}   outcome: {record.outcome or '-'}   started: {record.start or '-'}",
        f"  sheet: {record.source}",
        *totals,
        f"  payouts: {_totals(record)}   refused: {record.refused_items}   "
        f"awaiting review: {record.awaiting_review}",
    ]
    if record.started_by:
        lines.append(f"  started by: {record.started_by}")
    if record.approved is not None:
        who = f" by {record.approved_by}" if record.approved_by else ""
        # Not approved is not rejected: a run can end unapproved for lack of a key or time (the state says).
        refused = "rejected" if record.state == "Rejected" else "not approved"
        lines.append(f"  approval: {'approved' if record.approved else refused}{who}")
    for a in attention[:20]:
        where = f"row {a['row']}" if a.get("row") is not None else "sheet"
        state = f" [{a['status']}, paid: {a['paid']}]" if a.get("paid") else ""
        detail = f" ({a['detail']})" if a.get("detail") else ""
        lines.append(
            f"  {where} {a['kind']}: {a.get('payee') or '-'} {a.get('amount') or ''} "
            f"{a.get('currency') or ''} - {a['reason']}{detail}{state}"
        )
        if a.get("next_step"):
            lines.append(f"      next: {a['next_step']}")
    if len(attention) > 20:
        lines.append(f"  ... and {len(attention) - 20} more rows needing a person (see the report)")
    lines += [f"  report {kind}: {path}" for kind, path in record.report_files.items()]
    if waiting:
        lines += _approval_lines(record, waiting)
    if others:
        ids = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        lines.append(f"  {counted(len(others), 'older run')} with the name {run!r}: {ids}")
    typer.echo("\n".join(lines))
