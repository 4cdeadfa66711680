"""Benchmark results: each run saved as JSON under benchmarks/results/; the table docs/performance.md shows.

``python -m benchmarks.results run NAME [--as SAVED] [-- ARGS...]`` runs ``benchmarks/NAME.py ARGS``, prints
its JSON as before and saves it as ``benchmarks/results/SAVED.json`` (default NAME) with the commit, the
machine and the load around the run. ``python -m benchmarks.results table [--write]`` renders one row per
saved result (targets, latest figure, baseline measured in the same run, commit, machine); ``--write`` puts it
between the markers of docs/performance.md, so the page shows what the saved files say and nothing else.
`make bench` does both. Standard library only: it runs with the runtime install, as the benchmarks do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- results: begin (python -m benchmarks.results table --write) -->", "<!-- results: end -->"

#: What each target key a benchmark prints means; a key missing here is shown as it is printed.
TARGETS = {
    "read_validate_le_3_5_s": "read+validate ≤ 3.5 s",
    "parser_child_overhead_le_0_3_s": "parser child ≤ +0.3 s",
    "peak_rss_le_400_mb": "peak RSS ≤ 400 MB",
    "reconcile_growth_le_50_mb": "4× the run: peak RSS within +50 MB",
    "speedup_ge_10x": "≥ 10× openpyxl",
    "check_le_1_5_s": "`check` ≤ 1.5 s",
    "check_ge_10x_faster": "`check` ≥ 10× the serverless dry run",
    "dry_run_with_server_le_5_s": "dry run with a server ≤ 5 s",
    "warm_report_le_8s": "warm report phase ≤ 8 s",
    "warm_peak_rss_le_400mb": "warm peak RSS ≤ 400 MB",
    "cold_wall_le_naive": "cold ≤ naive",
    "warm_2x_faster_than_naive": "warm ≥ 2× faster than naive",
    "warm_3x_fewer_calls": "warm ≥ 3× fewer calls",
    "cold_3x_faster_than_naive": "cold ≥ 3× faster than naive",
    "warm_6x_faster_than_naive": "warm ≥ 6× faster than naive",
    "429s_le_2pct": "≤ 2% 429s",
    "preflight_ge_90pct_of_limit": "pre-flight ≥ 90% of the limit",
    "warm_process_within_1_5s_of_settle": "warm process ≤ 1.5 s beyond the settle wait",
    "429s_le_5pct": "≤ 5% 429s",
    "preflight_ge_80pct_of_limit": "pre-flight ≥ 80% of the limit",
    "close_le_1_2x_paging": "close ≤ 1.2× the cursor-by-cursor paging",
    "close_le_1_3x_latency_floor": "close ≤ 1.3× the latency floor",
    "run_le_1_3x_latency_floor": "run reconciliation ≤ 1.3× the latency floor",
    "peak_rss_within_50mb_of_baseline": "peak RSS within 50 MB of the baseline size's",
    "every_row_paid": "every row paid",
    "exactly_once": "exactly once after a SIGKILL",
    "killed_mid_send": "killed mid-send (20% to 80% paid)",
    "rerun_replayed_what_was_paid": "the re-run replayed what was paid",
    "nothing_outlived_the_kill": "nothing outlived the kill",
}


def _get(data: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``; `default` where a part is missing."""
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return default
        value = value[part]
    return value


def _intake(r: Mapping[str, Any]) -> tuple[str, str]:
    figure = (
        f"{r['rows']:,} rows: {r['read_validate_seconds']} s ({r['read_validate_cpu_seconds']} s CPU + "
        f"{r['parser_child_cpu_seconds']} s in the parser child), peak RSS {r['peak_rss_mb']} MB; "
        f"child overhead {r['parser_child_overhead_seconds']} s"
    )
    baseline = f"the same read in-process: {r['in_process_read_validate_seconds']} s"
    if "openpyxl_read_seconds" in r:
        baseline += (
            f'; `pandas.read_excel(engine="openpyxl")` {r["openpyxl_read_seconds"]} s '
            f"(**{r['speedup_vs_openpyxl']}×**)"
        )
    return figure, baseline


def _flow_run(run: Mapping[str, Any] | None, name: str) -> str:
    if not run:
        return f"{name}: not run"
    pre = run.get("preflight") or {}
    rate = _get(pre, "rate_limit.achieved_per_s")
    at = f" at {rate} req/s" if rate else ""
    return (
        f"{name} **{run['wall_s']} s** (pre-flight {pre.get('wall_s')} s{at}, report "
        f"{_get(run, 'phase_durations_s.report')} s), {run['api_calls_total']:,} calls, "
        f"peak RSS {run['peak_rss_mb']} MB"
    )


def _scale_run(run: Mapping[str, Any]) -> str:
    rate = run.get("calls_per_s") or {}
    return (
        f"{run['sheet']['rows']:,} rows **{run['wall_s']} s** (pre-flight "
        f"{_get(run, 'phase_durations_s.preflight')} s), peak RSS {run['peak_rss_mb']} MB, "
        f"{run['api_calls_total']:,} calls: {rate.get('over_wall')}/s over the run, "
        f"{rate.get('over_send_and_poll')}/s over send and poll"
    )


def _payouts_scale(r: Mapping[str, Any]) -> tuple[str, str]:
    growth = r["peak_rss_growth_mb"]
    figure = f"cold, {r['format']}: {_scale_run(r['rows_run'])}; {growth:+} MB over the baseline"
    return figure, f"cold, {r['format']}: {_scale_run(r['baseline'])}"


def _payouts_kill(r: Mapping[str, Any]) -> tuple[str, str]:
    kill, after, rerun = r["kill"], r["emulator_after_rerun"], r["rerun"]
    figure = (
        f"{r['rows']:,} rows ({r['format']}): SIGKILL after {kill['after_s']} s with {kill['rows_paid']:,} "
        f"paid ({kill['rows_paid_share']:.0%}); the re-run replayed {r['replayed_payouts']:,} in "
        f"{rerun['wall_s']} s; the service then holds {after['payouts']:,} payouts for "
        f"{after['rows_paid']:,} rows, {after['rows_paid_more_than_once']} paid twice, "
        f"{after['amount_total']} in all: exactly once **{str(r['exactly_once']).lower()}**"
    )
    sheet = r["sheet_written"]
    return figure, f"the sheet: {sheet['rows']:,} rows, {sheet['amount_total']} in all"


def _payouts_e2e(r: Mapping[str, Any]) -> tuple[str, str]:
    mode = r.get("mode", "cold_warm")
    if mode == "scale":
        return _payouts_scale(r)
    if mode == "kill_mid_run":
        return _payouts_kill(r)
    if mode == "through_cli":
        return _payouts_through_cli(r)
    figure = f"{r['rows']:,} rows: {_flow_run(r.get('cold'), 'cold')}; {_flow_run(r.get('warm'), 'warm')}"
    floor, beyond = r.get("prefect_floor"), r.get("beyond_settle_s") or {}
    if floor and r.get("warm"):
        figure += (
            f"; the warm process {r['warm']['process_s']} s, {beyond['warm_process']} s beyond the settle "
            f"wait, an empty Prefect flow process **{floor['median_s']} s** of it"
        )
    naive = r.get("naive_16way")
    if not naive:
        return figure, "no baseline (`--baseline-rows 0`)"
    ratios = r.get("ratios") or {}
    return figure, (
        f"naive 16-way {naive['wall_s_scaled_to_rows']} s, {naive['api_calls_total']:,} calls "
        f"({naive['rows']:,} rows): cold {ratios.get('naive_wall_over_cold_wall')}×, warm "
        f"{ratios.get('naive_wall_over_warm_wall')}× faster, {ratios.get('naive_calls_over_warm_calls')}× "
        "fewer calls warm"
    )


def _payouts_through_cli(r: Mapping[str, Any]) -> tuple[str, str]:
    def side(name: str) -> str:
        run = r[name]
        return (
            f"{name} **{run['wall_s']} s** (the flow {run['flow_s']:.2f} s, around it "
            f"{run['around_the_flow_s']} s)"
        )

    history = r.get("history") or 0
    figure = (
        f"`payops payouts` through `payops serve`, {r['rows']:,} rows at {r['latency_ms']} ms a request, "
        f"the service holding {history:,} earlier transactions: {side('cold')}; {side('warm')}"
    )
    ratios = r["ratios"]
    return figure, (
        f"naive 16-way {r['naive_16way']['wall_s']} s: cold {ratios['naive_wall_over_cold_wall']}×, warm "
        f"{ratios['naive_wall_over_warm_wall']}× faster"
    )


def _cli(r: Mapping[str, Any]) -> tuple[str, str]:
    figure = (
        f"`payops check` {_get(r, 'check.median_s'):.2f} s ({_get(r, 'check.median_cpu_s'):.2f} s CPU); "
        f"`payops payouts --dry-run` with a running server {_get(r, 'dry_run_with_server.median_s'):.2f} s "
        f"(first {_get(r, 'dry_run_with_server.first_s'):.2f} s)"
    )
    baseline = (
        f"the dry run without a server {float(_get(r, 'dry_run_no_server.seconds')):.2f} s: `check` "
        f"{r['check_speedup_vs_dry_run_no_server']}× faster"
    )
    door = r.get("dry_run_through_the_payops_server")
    if door:
        through, direct = door["through_server"]["median_s"], door["direct"]["median_s"]
        figure += f"; through the payops server {through:.2f} s, {door['ratio']}× the direct path"
        baseline += f"; the direct path on the same `payops serve` {direct:.2f} s"
    return figure, baseline


def _revisions(r: Mapping[str, Any]) -> tuple[str, str]:
    def side(part: str) -> str:
        m, over = _get(r, f"{part}.median_seconds") or {}, _get(r, f"{part}.over_base") or {}
        cpu = _get(r, f"{part}.cpu_over_base.head")
        cpu_text = f", CPU {cpu}×" if cpu is not None else ""
        interval = _get(r, f"{part}.over_base_95.head")
        interval_text = f", 95% interval {interval[0]}× to {interval[1]}×" if interval else ""
        ratio = f"**{over.get('head')}×**{interval_text}{cpu_text}"
        return f"{part}: head {m.get('head')} s, base {m.get('base')} s ({ratio})"

    parts = [side(part) for part in ("intake", "payouts") if part in r]
    return "; ".join(parts), f"revision `{r['base']}`, interleaved in the same run"


def _reconcile(r: Mapping[str, Any]) -> tuple[str, str]:
    close, run, sliced, reports = r["close"], r["run_reconciliation"], r["sliced"], r["reports"]
    paging = r["paging_cursor_by_cursor"]
    at = f" at {r['latency_ms']} ms a request" if r.get("latency_ms") else " on loopback"
    figure = (
        f"close of {r['transactions']:,} transactions{at} **{close['wall_s']} s** ({close['cpu_s']} s CPU, "
        f"{close['api_calls']:,} calls, {close['in_flight_max']} at once): **{r['close_over_paging']}×** "
        f"the cursor-by-cursor paging; the run's reconciliation of as many payouts {run['wall_s']} s "
        f"({run['cpu_s']} s CPU); the window read in slices alone {sliced['wall_s']} s ({sliced['cpu_s']} s "
        f"CPU); the close's reports (xlsx, csv, JSON) {reports['wall_s']} s more; peak RSS "
        f"{close['peak_rss_mb']} MB"
    )
    floor = r.get("latency_floor")
    if floor:
        figure += (
            f"; against the latency floor {floor['wall_s']} s: close **{r['close_over_latency_floor']}×**, "
            f"run **{r['run_over_latency_floor']}×**"
        )
    replayed = r.get("slices_replayed_at_the_latency")
    if replayed:
        figure += (
            f"; the same cuts replayed at exactly the latency with no CPU (slicing's own cost) "
            f"{replayed['wall_s']} s, {replayed['over_latency_floor']}×, {replayed['requests']:,} requests"
        )
    cpu_floor = _get(r, "cpu_floor.wall_s")
    if cpu_floor:
        figure += (
            f"; CPU floor on this machine (the client's CPU, or its and the emulator's over the cores): "
            f"close {cpu_floor['close']} s, run {cpu_floor['run']} s, slices alone {cpu_floor['sliced']} s"
        )
    baseline = (
        f"paging cursor by cursor {paging['wall_s']} s ({paging['cpu_s']} s CPU, {paging['api_calls']:,} "
        "calls)"
    )
    naive = r.get("naive")
    if naive:
        baseline += (
            f"; naive per row {naive['extrapolated_wall_s']} s extrapolated ({naive['extrapolated']}, "
            f"**{r['naive_over_close_extrapolated']}×**)"
        )
    return figure, baseline


def _webhooks(r: Mapping[str, Any]) -> tuple[str, str]:
    figure = (
        f"{r['deliveries']:,} deliveries at {r['deliveries_per_s']}/s, "
        f"{r['accepted_lost_from_inbox']} accepted lost, {r['missing_in_prefect']} missing in Prefect; "
        f"`/healthz` p95 {r['healthz_p95_ms']} ms, "
        f"flow-run creation p95 {r['flow_run_create_p95_s']} s (Prefect on {r['prefect_db']})"
    )
    idle = r.get("baseline_idle") or {}
    return figure, "idle: " + ", ".join(f"{k} {v}" for k, v in idle.items() if not isinstance(v, list | dict))


def _streaming_csv(r: Mapping[str, Any]) -> tuple[str, str]:
    big, base = r["streamed_rows"], r["streamed_base"]
    figure = (
        f"{r['rows']:,} csv rows streamed: peak RSS {big['peak_rss_mb']} MB, "
        f"{r['rows_per_s_streamed']:,} rows/s (+{r['peak_rss_growth_mb']} MB over {r['base_rows']:,} rows)"
    )
    whole = r["whole_base"]
    return (
        figure,
        f"{r['base_rows']:,} rows streamed {base['peak_rss_mb']} MB; read whole {whole['peak_rss_mb']} MB",
    )


def _reconcile_run_memory(r: Mapping[str, Any]) -> tuple[str, str]:
    runs = {(x["variant"], x["payouts"]): x for x in r["results"]}
    small, large = r["small"], r["large"]
    grew = r["peak_rss_growth_large_minus_small_mb"]

    def side(variant: str) -> str:
        a, b = runs[(variant, small)], runs[(variant, large)]
        return (
            f"peak RSS +{a['peak_rss_growth_mb']} MB on {small:,} payouts ({a['wall_s']} s), "
            f"+{b['peak_rss_growth_mb']} MB on {large:,} ({b['wall_s']} s): **+{grew[variant]} MB**"
        )

    baseline = f"revision `{r['baseline_rev']}` (one frame): {side('whole')}" if "whole" in grew else "—"
    return f"run reconciliation, chunked: {side('chunked')}", baseline


#: benchmark script → (latest figure, baseline in the same run) read from its JSON
ROWS: dict[str, Callable[[Mapping[str, Any]], tuple[str, str]]] = {
    "intake": _intake,
    "payouts_e2e": _payouts_e2e,
    "cli": _cli,
    "revisions": _revisions,
    "reconcile": _reconcile,
    "webhooks": _webhooks,
    "streaming_csv": _streaming_csv,
    "reconcile_run_memory": _reconcile_run_memory,
}


def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def machine() -> dict[str, Any]:
    """What the figures depend on: cores, CPU model, memory, Python (never the host's name)."""
    model = platform.processor() or platform.machine()
    meminfo = Path("/proc/meminfo")
    memory_gb = None
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), model)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": memory_gb,
        "python": platform.python_version(),
    }


def parse_output(stdout: str) -> dict[str, Any]:
    """The JSON document a benchmark printed last on stdout (a few print progress lines before it)."""
    text = stdout.strip()
    starts = [i for i, line in enumerate(text.splitlines()) if line.startswith("{")]
    lines = text.splitlines()
    for start in reversed(starts):
        try:
            return json.loads("\n".join(lines[start:]))
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no JSON document at the end of the benchmark's output: {text[-300:]!r}")


def record(
    name: str,
    args: list[str],
    saved_as: str | None = None,
    results: Path = RESULTS,
    script: Path | None = None,
) -> Path:
    """Run ``benchmarks/NAME.py ARGS``, echo its stdout, save its JSON with commit and machine; the path."""
    script = script or ROOT / "benchmarks" / f"{name}.py"
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = dt.datetime.now(dt.UTC)
    # the code measured is the code at the start: later edits of the checkout do not count
    commit = _git("rev-parse", "--short", "HEAD")
    # saved results and the page rendered from them are not code: a second benchmark run after a first
    # would otherwise be "+ changes"
    uncommitted = bool(
        _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results", ":!docs")
    )
    proc = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    load_after = [round(x, 2) for x in os.getloadavg()]
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"benchmarks/{name}.py exited {proc.returncode}: nothing saved")
    saved = {
        "benchmark": name,
        "command": " ".join([f"benchmarks/{name}.py", *args]),
        "commit": commit,
        "uncommitted_changes": uncommitted,
        "recorded_at": started.isoformat(timespec="seconds"),
        "machine": {**machine(), "load_before": load_before, "load_after": load_after},
        "result": parse_output(proc.stdout),
    }
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{saved_as or name}.json"
    path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
    return path


def _targets(result: Mapping[str, Any]) -> str:
    targets = result.get("targets") or result.get("targets_met") or {}
    if not targets:
        return "—"
    return "; ".join(f"{TARGETS.get(k, k)} {'✓' if held else '✗ **missed**'}" for k, held in targets.items())


def _machine_text(saved: Mapping[str, Any]) -> str:
    m = saved.get("machine") or {}
    load = f"load {m['load_before'][0]} → {m['load_after'][0]}" if m.get("load_before") else ""
    parts = [f"{m.get('cpus')} cores {m.get('cpu_model')}", f"{m.get('memory_gb')} GB", load]
    return ", ".join(p for p in parts if p)


def row(saved: Mapping[str, Any]) -> list[str]:
    """One table row: benchmark, targets, latest figure, baseline in the same run, commit, machine."""
    name, result = saved["benchmark"], saved["result"]
    extract = ROWS.get(name)
    if extract is None:
        raise ValueError(f"benchmarks/results: no row for benchmark {name!r} (known: {', '.join(ROWS)})")
    figure, baseline = extract(result)
    commit = f"`{saved['commit']}`" + (" + changes" if saved.get("uncommitted_changes") else "")
    when = f"{commit}, {str(saved.get('recorded_at', ''))[:10]}"
    return [f"`{saved['command']}`", _targets(result), figure, baseline, when, _machine_text(saved)]


def table(results: Path = RESULTS) -> str:
    """The markdown table of every saved result, one row each, by file name."""
    lines = [
        "| benchmark | targets | latest figure | baseline in the same run | commit | machine |",
        "|---|---|---|---|---|---|",
    ]
    files = sorted(results.glob("*.json")) if results.is_dir() else []
    for path in files:
        cells = row(json.loads(path.read_text(encoding="utf-8")))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if not files:
        lines.append("| (no saved results: run `make bench`) | | | | | |")
    return "\n".join(lines)


def write_doc(doc: Path = DOC, results: Path = RESULTS) -> None:
    """Replace the table between the markers of `doc` with the one the saved results give."""
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{doc}: the markers {BEGIN!r} and {END!r} are missing")
    doc.write_text(f"{head}{BEGIN}\n{table(results)}\n{END}{tail}", encoding="utf-8")


def split_benchmark_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """This command's arguments and, after the first ``--``, the benchmark's own (kept whole: an argparse
    remainder after NAME would also swallow ``--as``)."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run benchmarks/NAME.py and save its JSON")
    run.add_argument("name", choices=sorted(ROWS))
    run.add_argument("--as", dest="saved_as", help="file name under benchmarks/results/ (default NAME)")
    shown = sub.add_parser("table", help="print the table of saved results")
    shown.add_argument("--write", action="store_true", help="write it into docs/performance.md")
    ours, theirs = split_benchmark_args(sys.argv[1:] if argv is None else argv)
    ns = ap.parse_args(ours)
    if ns.command == "run":
        print(f"saved {record(ns.name, theirs, ns.saved_as).relative_to(ROOT)}", file=sys.stderr)
    elif ns.write:
        write_doc()
    else:
        print(table())


if __name__ == "__main__":
    main()
