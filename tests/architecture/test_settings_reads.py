"""payops' settings are read in one place (store/settings.py) at entry points, and passed on.

An AST scan of every module of flows/, tasks/, connectors/, store/ and sandbox/: none touches ``os.environ``
or ``os.getenv`` except the modules listed below with the reason, and only the flows' entry points (and
one Prefect hook) call ``PayopsSettings.from_env``. The checker is fed synthetic modules to prove it reports.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("flows", "tasks", "connectors", "store", "sandbox")

#: Modules that may touch the environment, and why (none of them reads a payops setting).
ENVIRONMENT_ALLOWED = {
    "store/settings.py": "the settings module itself (pydantic-settings reads PAYOPS_*)",
    "tasks/intake/sandboxed.py": "copies the environment for the sheet parser's child process",
}
#: Modules that may read the settings from the environment: entry points Prefect calls in a flow's process.
FROM_ENV_ALLOWED = {
    "flows/payouts.py",
    "flows/utility_purchases.py",
    "flows/reconcile.py",
    "flows/transactions.py",
    "flows/settlements.py",
    "flows/followup.py",
    "flows/wallet.py",
    "flows/events.py",
    "tasks/events/alerts.py",  # events_catch_up_hook: a completion hook Prefect calls
    "tasks/approval/outcome_notices.py",  # payout_run_hook: a failure/crash hook Prefect calls
}


def environment_reads(source: str) -> list[int]:
    """Lines where ``source`` touches ``os.environ``/``os.getenv``/``os.putenv`` or imports them from os."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "putenv", "environb"}:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(a.name in {"environ", "getenv", "putenv", "environb"} for a in node.names):
                lines.append(node.lineno)
    return sorted(lines)


def from_env_calls(source: str) -> list[int]:
    """Lines calling ``<anything>.from_env()`` (the settings read)."""
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
    return sorted(c.lineno for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "from_env")


def modules() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
        for room in ROOMS
        for path in sorted((ROOT / room).rglob("*.py"))
    ]


def test_no_module_below_the_entry_points_reads_the_environment() -> None:
    found = [
        f"{name}:{line}"
        for name, source in modules()
        if name not in ENVIRONMENT_ALLOWED
        for line in environment_reads(source)
    ]
    assert found == [], f"read payops settings through payops.store.settings.PayopsSettings instead: {found}"


def test_only_entry_points_read_the_settings() -> None:
    found = [
        f"{name}:{line}"
        for name, source in modules()
        if name not in FROM_ENV_ALLOWED and name != "store/settings.py"
        for line in from_env_calls(source)
    ]
    assert found == [], f"take the settings as an argument from the entry point instead: {found}"


def test_the_checks_report_what_they_forbid() -> None:
    assert environment_reads("import os\nx = os.environ.get('PAYOPS_HOME')\n") == [2]
    assert environment_reads("import os\nx = os.getenv('PAYOPS_HOME')\n") == [2]
    assert environment_reads("from os import environ\n") == [1]
    assert environment_reads("import os\nos.path.join('a')\n") == []
    assert from_env_calls("from store import PayopsSettings\ns = PayopsSettings.from_env()\n") == [2]
    for allowed in [*ENVIRONMENT_ALLOWED, *FROM_ENV_ALLOWED]:
        assert (ROOT / allowed).is_file(), f"{allowed} is listed but does not exist"
