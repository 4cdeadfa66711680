"""The built wheel installs one import name, `payops`, into a fresh virtual environment, beside a Prefect
project that has its own `flows` and `tasks` packages: both import, each from its own place, and so does
every payops module, the console script and the files payops reads at run time."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from payops.store.database import SCHEMA_HEADS

from payops import FOLDERS
from tests.wheel_venv import run, wheel_venv

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's python, a Prefect project folder with its own `flows` and `tasks`)."""
    base = tmp_path_factory.mktemp("wheel")
    python = wheel_venv(base)

    project = base / "project"
    for package, body in {
        "flows": "from prefect import flow\n\nfrom payops.tasks.intake import read_payout_sheet\n\n"
        "OWNER = 'project'\n\n\n@flow\ndef hello() -> str:\n    return OWNER + read_payout_sheet.__name__\n",
        "tasks": 'OWNER = "project"\n',
    }.items():
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(body)
    return python, project


def test_the_wheel_holds_one_import_name(installed: tuple[Path, Path]) -> None:
    python, project = installed
    site = Path(
        run(
            [str(python), "-c", "import payops, os; print(os.path.dirname(payops.__path__[0]))"], cwd=project
        ).stdout.strip()
    )
    record = next(site.glob("payops-*.dist-info")) / "top_level.txt"
    assert record.read_text().split() == ["payops"]
    assert not any((site / name).exists() for name in FOLDERS)


def test_a_project_with_its_own_flows_and_tasks_imports_beside_payops(installed: tuple[Path, Path]) -> None:
    python, project = installed
    check = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import flows, tasks
        import payops, payops.flows, payops.tasks
        assert flows.OWNER == tasks.OWNER == "project", (flows.__file__, tasks.__file__)
        assert flows.hello.name == "hello" and flows.hello.fn() == "projectread_payout_sheet"
        assert "site-packages" in payops.flows.__file__ and "site-packages" in payops.tasks.__file__
        skipped = ("__main__", "payops.store.migrations")
        names = [m.name for m in pkgutil.walk_packages(payops.__path__, "payops.")
                 if not m.name.endswith(skipped[0]) and not m.name.startswith(skipped[1])]
        for name in names:
            module = importlib.import_module(name)
            assert "site-packages" in module.__file__, module.__file__
        print(len(names))
        """
    )
    imported = int(run([str(python), "-c", check], cwd=project).stdout.split()[-1])
    assert imported > 150


def test_the_console_script_and_run_time_files_install(installed: tuple[Path, Path], tmp_path: Path) -> None:
    python, project = installed
    assert "payouts" in run([str(python.parent / "payops"), "--help"], cwd=project).stdout
    files = textwrap.dedent(
        """
        from importlib.resources import files
        d = files("payops.deployments")
        assert (d / "prefect.yaml").is_file()
        assert any(p.name.endswith(".yaml") for p in (d / "automations").iterdir())
        c = files("payops.deployments.console")
        assert any((c / "templates").iterdir()) and any((c / "static").iterdir())
        versions = files("payops.store.migrations") / "versions"
        assert any(p.name.startswith("0001_") for p in versions.iterdir())
        """
    )
    run([str(python), "-c", files], cwd=project)
    # the payops database is created from the installed migrations
    home = {**os.environ, "PAYOPS_HOME": str(tmp_path / "home")}
    payops = str(python.parent / "payops")
    (head,) = SCHEMA_HEADS
    assert f"at {head}" in run([payops, "db", "upgrade"], cwd=project, env=home).stdout
    assert f"revision: {head}" in run([payops, "db", "current"], cwd=project, env=home).stdout
