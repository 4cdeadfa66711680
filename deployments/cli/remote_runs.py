"""`payops payouts` and `payops payouts retry-failed` through the payops server: the sheet goes to the server,
which starts the run as the caller (signed), the workers pay it with the service credential they hold, and
this command follows the run to its end and prints the same summary, with the same exit code, as a run in
this process does (docs/cli.md). Nothing here imports Prefect: the operator's command stays light.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn
from urllib.parse import quote

import typer
from payops.deployments.cli._common import EXIT_ERROR, EXIT_INVALID, fail
from payops.deployments.cli.front_door import FrontDoor, ServerRefused, ask, refused
from payops.tasks.payouts.fails_again import FailsAgain, fails_again_lines
from payops.tasks.payouts.run_summary import PayoutRunSummary
from payops.tasks.runtime.plurals import counted, noun_for
from payops.tasks.runtime.run_summary import RunSummary

POLL_S = (0.2,)
"""Seconds between two reads of the run's state (a light read: one Prefect call on the server)."""


def read_sheet(file: str) -> bytes:
    """The sheet's bytes (a path or an fsspec URL); an unreadable one is one line, exit 2."""
    import fsspec

    try:
        with fsspec.open(file, "rb") as fh:
            return fh.read()
    except (OSError, ValueError) as exc:
        fail(f"cannot read {file}: {type(exc).__name__}", EXIT_INVALID)


def pay_through_server(
    door: FrontDoor, file: str, options: dict[str, Any], *, json_out: bool, report_dir: str | None
) -> NoReturn:
    """Upload ``file`` and pay it on the server with ``options`` (`RunOptions`); follow it to its end."""
    data = read_sheet(file)
    started = ask(
        door,
        "POST",
        "/runs",
        files={"sheet": (PurePosixPath(file).name, data)},
        data={"options": json.dumps({**options, "channel": "cli"})},
    )
    _say(json_out, f"run {started['name']} started on {door.url} (flow run {started['id']})")
    follow(door, started["id"], json_out=json_out, report_dir=report_dir)


def retry_through_server(
    door: FrontDoor, label: str, options: dict[str, Any], *, json_out: bool, report_dir: str | None
) -> NoReturn:
    """Pay run ``label``'s failed and refused rows again on the server; follow the retry to its end."""
    body = {"label": label, "options": {**options, "channel": "cli"}}
    started = ask(door, "POST", "/runs/retry-failed", json=body)
    so_far = " that failed so far (the run goes on)" if started.get("while_running") else ""
    _say(
        json_out,
        f"retrying {counted(int(started.get('rows') or 0), 'row')} of {label}{so_far} "
        f"as run {started['label']}",
    )
    dead = [FailsAgain(d.get("row"), d["reference"], d["why"]) for d in started.get("fails_again") or []]
    for line in fails_again_lines(dead):  # on stderr even with --json: a warning, not the run's output
        typer.echo(line, err=True)
    follow(door, started["id"], json_out=json_out, report_dir=report_dir)


def _say(json_out: bool, line: str) -> None:
    if not json_out:
        typer.echo(line, err=True)


def _news(run: dict[str, Any]) -> str:
    """What a person following the run is told when its state changes."""
    wait = run.get("approval")
    if run["paused"] and wait:
        others = f", not {', '.join(wait['excluded'])}" if wait["excluded"] else ""
        found = f"; acknowledge: {', '.join(wait['findings'])}" if wait["findings"] else ""
        return (
            f"run {run['name']}: waits for {wait['still_needed']} more "
            f"{noun_for(int(wait['still_needed']), 'approval')} of {wait['required']}"
            f"{others}{found} (payops approve {run['id']})"
        )
    return f"run {run['name']}: {run['state']}"


def follow(
    door: FrontDoor,
    run_id: str,
    *,
    json_out: bool,
    report_dir: str | None = None,
    kind: type[RunSummary] = PayoutRunSummary,
) -> NoReturn:
    """Read the run until it is final, telling its state changes on stderr; then print its summary (a
    ``kind``; only its JSON with ``json_out``), save its reports in ``report_dir`` when given, and exit with
    its outcome's code. Ctrl-C stops following, never the run.

    The run's state is read often and cheaply (``/flow-runs/ID``: one Prefect read on the server); a payout
    run's whole page (``/runs/ID``: what it waits for, its record, reports) when its state changes, and every
    2 s while it waits for approvals."""
    told, state, step = "", None, 0
    try:
        while True:
            run = ask(door, "GET", f"/flow-runs/{run_id}")
            waiting_news = run["paused"] and step % 10 == 0  # approvals given meanwhile
            if kind is PayoutRunSummary and ((run["state"], run["final"]) != state or waiting_news):
                state = (run["state"], run["final"])
                run = ask(door, "GET", f"/runs/{run_id}")
            news = _news(run)
            if news != told:
                _say(json_out, news)
                told = news
            if run["final"]:
                break
            time.sleep(POLL_S[min(step, len(POLL_S) - 1)])
            step += 1
    except KeyboardInterrupt:
        fail(f"interrupted: the run goes on on the server; follow it with `payops runs show {run_id}`")
    _finish(door, run, kind, json_out=json_out, report_dir=report_dir)


def _finish(
    door: FrontDoor, run: dict[str, Any], kind: type[RunSummary], *, json_out: bool, report_dir: str | None
) -> NoReturn:
    data = run.get("summary")
    summary = kind.model_validate(data) if isinstance(data, dict) else None
    if summary is not None:
        if json_out:
            sys.stdout.write(json.dumps(summary.as_json(), default=str) + "\n")
        else:
            typer.echo(summary.text())
    if report_dir and run.get("reports"):
        _save_reports(door, run, Path(report_dir), json_out)
    if run["state_type"] in ("FAILED", "CRASHED") or summary is None:
        fail(run.get("message") or f"the flow run ended {run['state']}")
    raise typer.Exit(summary.exit_code)


def _save_reports(door: FrontDoor, run: dict[str, Any], folder: Path, json_out: bool) -> None:
    """The run's reports, downloaded from the server into ``folder``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in run["reports"]:
            data = door.send("GET", f"/runs/{run['id']}/reports/{quote(name, safe='')}").content
            (folder / PurePosixPath(name).name).write_bytes(data)
    except ServerRefused as exc:
        refused(exc)
    except OSError as exc:
        fail(f"could not save the reports in {folder}: {exc}", EXIT_ERROR)
    _say(json_out, f"reports saved in {folder}: {', '.join(run['reports'])}")
