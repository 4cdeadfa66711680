"""Benchmark: this checkout against an earlier revision, same run, same inputs, interleaved.

Answers "is the code slower than it was at REV?" for two paths every payroll takes:

* intake: ``tasks.intake.read_payout_sheet`` on one generated 100,000-row xlsx (the public reader both
  revisions have), each sample in its own subprocess;
* payouts: ``payops payouts SHEET --json --no-name-check`` on one 2,000-row sheet (the plain rows of
  ``benchmarks/sheets.py``: no payee names, seven amounts, so the pre-flight's newer lookup cache and fee
  grid have little to add and the comparison is about the code path), both revisions against one emulator
  and one Prefect server started before timing.

REV is checked out in a temporary ``git worktree`` and run with this checkout's virtualenv (its packages
are the same pins); its ``PYTHONPATH`` puts its own tree first (a tree with the one import name ``payops``
gets a folder where ``payops`` holds that tree's folders; an older tree imports its folders by their
names). Samples alternate base/head ``--repeat`` times and medians are compared, each ratio with a 95%
bootstrap interval (``over_base_95``): a ratio within 3% is shown only when its interval is. The default
base is the last commit before the structural clean-up of issue 20 (typed summaries, one home for
references and polling, the CLI as a package).

Usage: python benchmarks/revisions.py [--base REV] [--intake-rows 100000] [--payout-rows 2000 (0: intake
       alone)] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from payops.deployments.demo import unattended_home  # noqa: E402
from payops.deployments.processes import free_port, read_env_file, start_sandbox  # noqa: E402

from benchmarks import intake as intake_bench  # noqa: E402
from benchmarks.sheets import payroll_rows, write_sheet  # noqa: E402
from payops import FOLDERS  # noqa: E402

PRE_CLEANUP = "9cb9603"

_SHIMS: dict[Path, Path] = {}


def one_name(tree: Path) -> bool:
    """Whether `tree` installs under the one import name `payops` or imports its folders directly."""
    return (tree / "payops" / "__init__.py").is_file()


def module(tree: Path, name: str) -> str:
    """`name` (e.g. ``deployments.cli``) as `tree` imports it."""
    return f"payops.{name}" if one_name(tree) else name


def measure_intake(tree: Path) -> str:
    """benchmarks/intake.py's measurement for `tree`, preceded by the line that says whose code ran."""
    code = intake_bench._MEASURE_INTAKE
    if not one_name(tree):
        code = code.replace("payops.", "")
    tasks = module(tree, "tasks")
    return f"import os, sys, {tasks}\nsys.stderr.write(os.path.realpath({tasks}.__file__) + '\\n')\n" + code


SAFE_PATH = ["-P"]
"""Python's ``-P``: the working directory (the tree) is not put first on the path. A tree with the one import
name has a ``payops`` folder of its own, holding only ``__init__.py``, which would shadow the shim
(:func:`tree_env`) and leave its sub-packages to this checkout's editable install."""


def tree_env(tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that runs `tree`'s code: its folders first on the path (for a tree with the one import
    name, a folder whose `payops` links to them, ahead of this checkout's editable install)."""
    path = [str(tree)]
    if one_name(tree):
        if tree not in _SHIMS:
            shim = Path(tempfile.mkdtemp(prefix="payops-revision-"))
            (shim / "payops").mkdir()
            shutil.copy(tree / "payops" / "__init__.py", shim / "payops" / "__init__.py")
            for folder in FOLDERS:
                (shim / "payops" / folder).symlink_to(tree / folder, target_is_directory=True)
            _SHIMS[tree] = shim
        path.insert(0, str(_SHIMS[tree]))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **(extra or {})}


def tree_home(tree: Path, home: Path) -> dict[str, str]:
    """`unattended_home` made by `tree`'s own code, so its database is at that tree's schema (this
    checkout's migrations may be ahead of it)."""
    code = (
        "import json, sys\nfrom pathlib import Path\n"
        f"from {module(tree, 'deployments.demo')} import unattended_home\n"
        "print(json.dumps(unattended_home(Path(sys.argv[1]))))"
    )
    return json.loads(python_in(tree, code, str(home), timeout=120).stdout.strip().splitlines()[-1])


def python_in(tree: Path, code: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` running `tree`'s code (`tree_env`, :data:`SAFE_PATH`), output captured."""
    return subprocess.run(
        [sys.executable, *SAFE_PATH, "-c", code, *args],
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )


def intake_sample(tree: Path, sheet: Path, mode: str = "child") -> dict:
    """One read of `sheet` by `tree`'s code; ``mode="in-process"`` parses without the parser child (the
    reader before issue 16's sandboxing; only a tree that has the child can be asked for it)."""
    out = python_in(tree, measure_intake(tree), str(sheet), mode, timeout=600)
    if not out.stderr.startswith(str(tree.resolve())):
        raise RuntimeError(f"{tree}: the sample did not run that tree's code ({out.stderr[:200]})")
    sample = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = sample["cpu"] + sample["child_cpu"]
    return {"seconds": sample["seconds"], "cpu_with_children": round(cpu, 3), "rows": sample["rows"]}


def payout_sample(tree: Path, sheet: Path, label: str, reports: Path, env: dict[str, str]) -> dict:
    cmd = [
        sys.executable,
        *SAFE_PATH,
        "-m",
        module(tree, "deployments.cli"),
        "payouts",
        str(sheet),
        "--label",
        label,
    ]
    cmd += ["--report-dir", str(reports), "--json", "--no-name-check"]
    t0, cpu0 = time.perf_counter(), os.times()
    out = subprocess.run(cmd, cwd=tree, env=tree_env(tree, env), capture_output=True, text=True, timeout=900)
    wall, cpu1 = time.perf_counter() - t0, os.times()
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: payops payouts exited {out.returncode}: {out.stderr[-800:]}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    # The CLI's own CPU (it runs the flow in-process): steadier than the wall on a shared machine.
    cpu = cpu1.children_user - cpu0.children_user + cpu1.children_system - cpu0.children_system
    return {
        "seconds": wall,
        "cpu_seconds": round(cpu, 3),
        "outcome": summary["outcome"],
        "statuses": summary.get("payouts_by_status"),
    }


def interleave(repeat: int, sides: dict[str, Callable[[int], dict]]) -> dict:
    """`repeat` samples of each side, taken in turn, the order reversed every other round (a shared emulator
    and Prefect server grow with every run, so the side always sampled second would always meet the larger
    state); medians, samples and each side's ratio to the first."""
    samples: dict[str, list[dict]] = {name: [] for name in sides}
    for i in range(repeat):
        for name, sample in list(sides.items())[:: 1 if i % 2 == 0 else -1]:
            samples[name].append(sample(i))
    medians = {name: statistics.median(s["seconds"] for s in runs) for name, runs in samples.items()}
    base = medians[next(iter(sides))]
    base_runs = [s["seconds"] for s in samples[next(iter(sides))]]
    result = {
        "median_seconds": {name: round(m, 3) for name, m in medians.items()},
        "over_base": {name: round(m / base, 3) for name, m in medians.items()},
        "over_base_95": {
            name: ratio_interval(base_runs, [s["seconds"] for s in runs])
            for name, runs in list(samples.items())[1:]
        },
    }
    first = samples[next(iter(sides))]
    cpu_key = next((k for k in ("cpu_seconds", "cpu_with_children") if k in first[0]), None)
    if cpu_key is not None:
        cpu = {name: statistics.median(s[cpu_key] for s in runs) for name, runs in samples.items()}
        cpu_base = statistics.median(s[cpu_key] for s in first)
        result["median_cpu_seconds"] = {name: round(c, 3) for name, c in cpu.items()}
        result["cpu_over_base"] = {name: round(c / cpu_base, 3) for name, c in cpu.items()}
    return {**result, "samples": samples}


def ratio_interval(base: list[float], head: list[float], draws: int = 4000) -> list[float]:
    """A 95% bootstrap interval of median(head) / median(base): how far the ratio of medians could move
    were the samples taken again (a machine whose samples spread by 20% gives a ratio that alone says
    little). Hand-rolled: the percentile bootstrap is a few lines, and the benchmark needs no scipy."""
    rng = random.Random(0)  # the same samples give the same interval
    ratios = sorted(
        statistics.median(rng.choices(head, k=len(head))) / statistics.median(rng.choices(base, k=len(base)))
        for _ in range(draws)
    )
    return [round(ratios[int(0.025 * draws)], 3), round(ratios[int(0.975 * draws) - 1], 3)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=PRE_CLEANUP, help=f"the earlier revision (default {PRE_CLEANUP})")
    ap.add_argument("--intake-rows", type=int, default=100_000)
    ap.add_argument("--payout-rows", type=int, default=2000, help="0: intake alone")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    head = ROOT
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base = tmp / "base"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", str(base), args.base], check=True, stdout=sys.stderr)
        try:
            result = {"base": args.base, "head": _head_commit(), "cpu_count": os.cpu_count()}
            sheet = tmp / "intake.xlsx"
            intake_bench.generate(sheet, args.intake_rows)
            result["intake"] = interleave(
                args.repeat,
                {
                    "base": lambda _: intake_sample(base, sheet),
                    "head": lambda _: intake_sample(head, sheet),
                    "head_parser_in_process": lambda _: intake_sample(head, sheet, "in-process"),
                },
            )
            if args.payout_rows:
                result["payouts"] = _payouts(args, base, head, tmp)
            result["load_avg_1m_at_end"] = os.getloadavg()[0]
        finally:
            subprocess.run([*git, "remove", "--force", str(base)], check=False, stdout=sys.stderr)
    print(json.dumps(result, indent=2))


def _payouts(args: argparse.Namespace, base: Path, head: Path, tmp: Path) -> dict:
    from payops.deployments.prefect_server import prefect_api
    from payops.store import PayopsSettings

    sheet = write_sheet(tmp / "payouts.xlsx", payroll_rows(args.payout_rows))
    env_file = tmp / "sandbox.env"
    with prefect_api(PayopsSettings.from_env(), say=lambda line: print(line, file=sys.stderr)) as api:
        emulator = start_sandbox(free_port(), env_file, start_timeout_s=120)
        try:
            env = {**read_env_file(env_file), "PREFECT_API_URL": api}
            # A home per tree: each migrates its own schema. The head's states its approval policy and runs
            # as an operator by token (a base without either ignores them).
            # A base that already names its operator (deployments/cli/identity.py) gets its home the same way.
            names_operator = (base / "deployments" / "cli" / "identity.py").exists()
            homes = {
                "base": tree_home(base, tmp / "home-base")
                if names_operator
                else {"PAYOPS_HOME": str(tmp / "home-base")},
                "head": unattended_home(tmp / "home-head"),
            }

            def side(tree: Path, name: str) -> Callable[[int], dict]:
                tree_env = {**env, **homes[name]}
                return lambda i: payout_sample(tree, sheet, f"rev-{name}-{i}", tmp / "reports", tree_env)

            return interleave(args.repeat, {"base": side(base, "base"), "head": side(head, "head")})
        finally:
            emulator.terminate()
            emulator.wait(10)


def _head_commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip()


if __name__ == "__main__":
    main()
