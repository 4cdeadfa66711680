"""The import rules of docs/architecture.md are import-linter contracts (pyproject.toml, [tool.importlinter]):
the tree keeps every one, and each one reports a synthetic module that breaks it.

`lint-imports` reads the installed layout (`payops.flows`, `payops.tasks`, ...). The repository keeps the
folders at its top (setup.py maps them below `payops`), so the checks run on a copy laid out as installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from payops import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def installed_layout(dest: Path) -> Path:
    """The package as a wheel lays it out (its Python files only), with the project's pyproject.toml."""
    (dest / "payops").mkdir(parents=True)
    shutil.copy(ROOT / "payops" / "__init__.py", dest / "payops" / "__init__.py")
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, dest / "payops" / folder, ignore=_not_python)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _not_python(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or (Path(directory, n).is_file() and n[-3:] != ".py")}


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    selected = [arg for c in contracts for arg in ("--contract", c)]
    return subprocess.run(
        [command, "--no-cache", "--no-logo", *selected],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    done = lint_imports(installed_layout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout


# (contract id, synthetic module path below payops/, its source): each breaks exactly that contract's rule.
BREAKS = [
    ("no-cycles", "deployments/cli/_loop.py", "from payops.deployments import _back\n"),
    ("rooms", "connectors/payments/_up.py", "def f():\n    from payops.tasks.runtime import clients\n"),
    ("rooms", "store/_up.py", "from payops.flows import outcomes\n"),
    ("tasks-by-feature", "tasks/runtime/_up.py", "from payops.tasks.payouts import polling\n"),
    ("tasks-by-feature", "tasks/intake/_up.py", "def f():\n    from payops.tasks.payouts import batching\n"),
    (  # an import for type checkers only counts too: the type belongs below both (tasks/rows)
        "tasks-by-feature",
        "tasks/reports/_typed.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from payops.tasks.payouts.spill import RowSpill\n",
    ),
    ("tasks-by-feature", "tasks/rows/_up.py", "from payops.tasks.reports import attention\n"),
    ("client-alone", "connectors/payments/_prefect.py", "import prefect\n"),
    ("client-alone", "connectors/payments/_aio.py", "from httpx_aiohttp import AiohttpTransport\n"),
    ("client-alone", "connectors/payments/_emu.py", "def f():\n    from payops.sandbox import create_app\n"),
    ("emulator-shares-wire-models", "sandbox/_client.py", "from payops.connectors.payments import _auth\n"),
    ("flows-compose", "flows/_http.py", "async def f():\n    from httpx import AsyncClient\n"),
    ("plain-database", "store/_prefect.py", "from prefect import flow\n"),
    ("light-payout-run", "flows/payouts.py", "def f():\n    import pandas\n"),  # the flow, rewritten
]


@pytest.mark.parametrize(("contract", "module", "source"), BREAKS)
def test_a_contract_reports_what_breaks_it(tmp_path: Path, contract: str, module: str, source: str) -> None:
    root = installed_layout(tmp_path)
    (root / "payops" / module).write_text(source)
    if contract == "no-cycles":  # the other half of the circle, through a lazy import
        (root / "payops" / "deployments" / "_back.py").write_text(
            "def main():\n    from payops.deployments.cli import _loop\n"
        )
    done = lint_imports(root, contract)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout and "0 kept, 1 broken" in done.stdout
    if contract == "no-cycles":
        assert "No cycles are allowed in payops.deployments." in done.stdout
    else:
        assert "payops." + module.removesuffix(".py").replace("/", ".") in done.stdout


def test_every_contract_has_a_breaking_case() -> None:
    assert {c["id"] for c in CONTRACTS} == {contract for contract, _, _ in BREAKS}


def test_allowed_imports_keep_the_contracts(tmp_path: Path) -> None:
    root = installed_layout(tmp_path)
    (root / "payops" / "sandbox" / "_models.py").write_text(
        "from payops.connectors.payments.models import PayoutRequest\n"
    )
    (root / "payops" / "flows" / "_tasks.py").write_text(
        "import prefect\nfrom payops.tasks.payouts.polling import poll_payouts_task\n"
    )
    done = lint_imports(root)
    assert done.returncode == 0, done.stdout + done.stderr
