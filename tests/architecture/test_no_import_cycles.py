"""No import cycles inside a room: `lint-imports` keeps the contract of pyproject.toml ([tool.importlinter],
import-linter's ``acyclic_siblings`` over every room), and the same contract reports a synthetic cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [command, "--no-cache", "--no-logo", str(config)], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_no_room_has_an_import_cycle() -> None:
    done = _lint_imports(ROOT / "pyproject.toml", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No import cycles inside a room KEPT" in done.stdout


def test_the_contract_reports_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    """The shape of the circle this contract was written against (cli/_common → prefect_server → demo →
    cli/_common), one import of it inside a function."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    room = tmp_path / "room"
    (room / "cli").mkdir(parents=True)
    (room / "__init__.py").write_text("")
    (room / "cli" / "__init__.py").write_text("")
    (room / "cli" / "common.py").write_text("from room import prefect_server\n")
    (room / "prefect_server.py").write_text("from room.demo import free_port\n")
    (room / "demo.py").write_text("def main():\n    from room.cli.common import run\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_packages =\n    room\n"
        f"exclude_type_checking_imports = {config['exclude_type_checking_imports']}\n\n"
        f"[importlinter:contract:cycles]\nname = {contract['name']}\ntype = {contract['type']}\n"
        "ancestors =\n    room\n"
    )
    done = _lint_imports(tmp_path / ".importlinter", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No cycles are allowed in room." in done.stdout
