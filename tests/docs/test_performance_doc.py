"""docs/performance.md shows what the saved benchmark results say, rendered by benchmarks/results.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import results
from tests.docs.markdown import ROOT, read

#: programs under benchmarks/ that are not benchmarks themselves
HELPERS = {
    "flow_process",
    "empty_flow",
    "sheets",
    "results",
    "payroll",
    "emulator",
    "exactly_once",
    "scale_runs",
    "front_door",
    "through_cli",
    "payops_server",
    "__init__",
}


def test_the_page_shows_the_committed_results() -> None:
    page = read("docs/performance.md")
    shown = page.split(results.BEGIN, 1)[1].split(results.END, 1)[0].strip()
    assert shown == results.table(results.RESULTS), "run: python -m benchmarks.results table --write"


def test_every_saved_result_renders() -> None:
    for path in sorted(results.RESULTS.glob("*.json")):
        saved = json.loads(path.read_text(encoding="utf-8"))
        assert saved["commit"] and saved["machine"]["cpus"], path
        assert len(results.row(saved)) == 6, path


def test_every_benchmark_has_a_row() -> None:
    programs = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - HELPERS
    assert programs == set(results.ROWS)


def _saved(result: dict, name: str = "cli", commit: str = "abc1234") -> dict:
    return {
        "benchmark": name,
        "command": f"benchmarks/{name}.py --repeat 3",
        "commit": commit,
        "uncommitted_changes": False,
        "recorded_at": "2026-01-02T03:04:05+00:00",
        "machine": {"cpus": 2, "cpu_model": "AMD EPYC", "memory_gb": 23.5, "load_before": [1.0]}
        | {"load_after": [2.0]},
        "result": result,
    }


CLI_RESULT = {
    "check": {"median_s": 0.9, "median_cpu_s": 0.8},
    "dry_run_no_server": {"seconds": 20.0},
    "dry_run_with_server": {"median_s": 5.5, "first_s": 6.0},
    "check_speedup_vs_dry_run_no_server": 22.2,
    "targets": {"check_le_1_5_s": True, "dry_run_with_server_le_5_s": False},
}


def test_a_row_has_target_figure_baseline_commit_and_machine() -> None:
    bench, targets, figure, baseline, commit, machine = results.row(_saved(CLI_RESULT))
    assert bench == "`benchmarks/cli.py --repeat 3`"
    assert targets == "`check` ≤ 1.5 s ✓; dry run with a server ≤ 5 s ✗ **missed**"
    assert "`payops check` 0.90 s" in figure and "5.50 s" in figure
    assert baseline == "the dry run without a server 20.00 s: `check` 22.2× faster"
    assert commit == "`abc1234`, 2026-01-02"
    assert machine == "2 cores AMD EPYC, 23.5 GB, load 1.0 → 2.0"


def test_write_doc_replaces_only_the_table(tmp_path: Path) -> None:
    saved = tmp_path / "results"
    saved.mkdir()
    (saved / "cli.json").write_text(json.dumps(_saved(CLI_RESULT)), encoding="utf-8")
    doc = tmp_path / "performance.md"
    doc.write_text(f"# before\n\n{results.BEGIN}\nstale\n{results.END}\n\nafter\n", encoding="utf-8")
    results.write_doc(doc, saved)
    text = doc.read_text(encoding="utf-8")
    assert "stale" not in text and "`abc1234`, 2026-01-02" in text
    assert text.startswith("# before\n") and text.endswith(f"{results.END}\n\nafter\n")


def test_an_unknown_benchmark_is_refused() -> None:
    with pytest.raises(ValueError, match="no row for benchmark 'mystery'"):
        results.row(_saved({}, name="mystery"))


def test_record_saves_the_json_with_commit_and_machine(tmp_path: Path) -> None:
    script = tmp_path / "fake.py"
    script.write_text(
        "import json, sys\nprint('progress line')\nprint(json.dumps({'args': sys.argv[1:]}, indent=2))\n",
        encoding="utf-8",
    )
    path = results.record("cli", ["--repeat", "1"], "cli-once", tmp_path / "out", script)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert path.name == "cli-once.json"
    assert saved["result"] == {"args": ["--repeat", "1"]}
    assert saved["command"] == "benchmarks/cli.py --repeat 1"
    assert len(saved["commit"]) >= 7 and saved["machine"]["cpus"] >= 1 and saved["machine"]["python"]


def test_a_failed_benchmark_saves_nothing(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit(3)\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="exited 3: nothing saved"):
        results.record("cli", [], None, tmp_path / "out", script)
    assert not (tmp_path / "out").exists()
