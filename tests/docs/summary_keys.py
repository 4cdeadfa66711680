"""The keys the payout run writes into its summary, read from the source: assignments to ``summary[KEY]``
(or ``<anything>.summary[KEY]``), ``summary.update({KEY: ...})``, ``summary.setdefault(KEY, ...)`` and the
dict ``summary_head`` returns."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.docs.markdown import ROOT

#: every module that writes keys into a payout run's summary: the flow, its intake head, its meter, the
#: reports (report_files) and the follow-up (which rewrites a finished run's summary)
WRITERS = (
    "flows/payouts.py",
    "flows/payout_parts.py",
    "tasks/payouts/sheet_check.py",
    "tasks/runtime/run_meter.py",
    "tasks/reports/run_reports.py",
    "tasks/payouts/followup.py",
)


def _is_summary(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "summary") or (
        isinstance(node, ast.Attribute) and node.attr == "summary"
    )


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def written_keys(source: str) -> set[str]:
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if isinstance(target, ast.Subscript) and _is_summary(target.value) and _text(target.slice):
                keys.add(str(_text(target.slice)))
        call = node.func if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Call) and isinstance(call, ast.Attribute) and _is_summary(call.value):
            if node.func.attr == "update" and node.args and isinstance(node.args[0], ast.Dict):
                keys.update(k for k in map(_text, node.args[0].keys) if k)
            if node.func.attr == "setdefault" and node.args and (key := _text(node.args[0])):
                keys.add(key)
        if isinstance(node, ast.FunctionDef) and node.name == "summary_head":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                    keys.update(k for k in map(_text, ret.value.keys) if k)
    return keys


def payout_summary_keys(root: Path = ROOT) -> set[str]:
    return set().union(*(written_keys((root / m).read_text(encoding="utf-8")) for m in WRITERS))
