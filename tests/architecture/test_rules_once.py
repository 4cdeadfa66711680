"""Rules stated once (docs/architecture.md, "Where each rule lives"): a copy of each is found (the
transient rule: tests/connectors/test_transient_rule.py; statuses: test_status_sets.py).

- the serialisation a key hashes a body in: `tasks/wire/references.canonical_json`;
- a run's clock: `tasks/runtime/run_meter.RunMeter` (the rate limiter times single requests, not runs);
- the outcomes a run ends with: `tasks/runtime/run_outcomes.Outcome`, compared by member, never by its text.
"""

from __future__ import annotations

import ast

import pytest
from payops.tasks.runtime.run_outcomes import Outcome

from tests.architecture.source_scan import find_in_rooms

ROOMS = ("tasks", "flows", "deployments", "connectors", "store")


def _is_call_to(node: ast.AST, module: str, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == module
    )


def hash_forms(source: str, filename: str = "<source>") -> list[str]:
    """``json.dumps(..., sort_keys=True, ...).encode()``: the bytes of a sorted serialisation, to hash."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "encode"
            and _is_call_to(node.func.value, "json", "dumps")
            and any(k.arg == "sort_keys" for k in node.func.value.keywords)  # type: ignore[attr-defined]
        ):
            found.append(f"{filename}:{node.lineno}")
    return found


def run_clocks(source: str, filename: str = "<source>") -> list[str]:
    """A run timed by hand: ``time.perf_counter()`` or ``time.process_time()`` outside the meter."""
    return [
        f"{filename}:{node.lineno}"
        for node in ast.walk(ast.parse(source, filename))
        if _is_call_to(node, "time", "perf_counter") or _is_call_to(node, "time", "process_time")
    ]


def _names_an_outcome(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        name = str(node.slice.value)
    return "outcome" in name


def bare_outcomes(source: str, filename: str = "<source>") -> list[str]:
    """An outcome compared with its text: ``outcome == "completed"``, ``s["outcome"] in ("dry_run", ...)``."""
    words = {o.value for o in Outcome}
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        if not any(_names_an_outcome(side) for side in sides):
            continue
        texts = [side for side in sides if isinstance(side, ast.Constant)]
        for side in sides:
            if isinstance(side, ast.Tuple | ast.Set | ast.List):
                texts += [e for e in side.elts if isinstance(e, ast.Constant)]
        if any(t.value in words for t in texts):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_keys_hash_one_serialisation() -> None:
    assert find_in_rooms(hash_forms, ROOMS, "tasks/wire/references.py") == []


def test_runs_are_timed_by_the_meter() -> None:
    found = find_in_rooms(run_clocks, ("tasks", "flows"), "tasks/runtime/run_meter.py")
    # the rate limiter times each request's round trip (its pacing), not a run
    assert [f for f in found if not f.startswith("tasks/runtime/ratelimit.py:")] == []


def test_outcomes_are_compared_by_member() -> None:
    assert (
        find_in_rooms(bare_outcomes, ("tasks", "flows", "deployments"), "tasks/runtime/run_outcomes.py") == []
    )


@pytest.mark.parametrize(
    ("checker", "source"),
    [
        (bare_outcomes, 'if summary.outcome == "completed":\n    done()\n'),
        (bare_outcomes, 'if s["outcome"] in ("dry_run", "not_approved"):\n    skip()\n'),
        (hash_forms, "key = digest(json.dumps(body, sort_keys=True).encode())\n"),
        (hash_forms, 'b = json.dumps(x, sort_keys=True, separators=(",", ":")).encode("utf-8")\n'),
        (run_clocks, "started = time.perf_counter()\nsummary.duration_s = time.perf_counter() - started\n"),
    ],
)
def test_each_checker_finds_a_copy(checker, source: str) -> None:
    assert checker(source, "synthetic.py")


@pytest.mark.parametrize(
    ("checker", "source"),
    [
        (hash_forms, "text = json.dumps(summary, sort_keys=True)\nprint(text)\n"),  # shown, not hashed
        (run_clocks, "deadline = time.monotonic() + 30\n"),
        (bare_outcomes, "if outcome == Outcome.COMPLETED:\n    done()\n"),
        (bare_outcomes, 'if run.status == "completed":\n    settle()\n'),  # a settlement run's status
    ],
)
def test_other_code_passes(checker, source: str) -> None:
    assert checker(source) == []
