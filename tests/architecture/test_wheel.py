"""The built wheel installs one import name, `payops`, into a fresh virtual environment, beside a Prefect
project that has its own `flows` and `tasks` packages: both import, each from its own place, and so does
every payops module, the console script and the files payops reads at run time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from payops.store.database import SCHEMA_HEADS

from payops import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "payops", *FOLDERS)

pytestmark = pytest.mark.e2e


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in (env or os.environ).items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's python, a Prefect project folder with its own `flows` and `tasks`)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for name in SOURCES:  # a copy, so the build leaves nothing in the checkout
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(src, source / name)
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
          str(source)], cwd=base)
    (wheel,) = dist.glob("payops-*.whl")

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=base)
    # payops' dependencies come from this test's environment, after the fresh site-packages (a path line in a
    # .pth file: the editable install's own .pth files there are not processed, so only the wheel is payops)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=base).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

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
    site = Path(_run([str(python), "-c", "import payops, os; print(os.path.dirname(payops.__path__[0]))"],
                     cwd=project).stdout.strip())
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
    imported = int(_run([str(python), "-c", check], cwd=project).stdout.split()[-1])
    assert imported > 150


def test_the_console_script_and_run_time_files_install(installed: tuple[Path, Path], tmp_path: Path) -> None:
    python, project = installed
    assert "payouts" in _run([str(python.parent / "payops"), "--help"], cwd=project).stdout
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
    _run([str(python), "-c", files], cwd=project)
    # the payops database is created from the installed migrations
    home = {**os.environ, "PAYOPS_HOME": str(tmp_path / "home")}
    payops = str(python.parent / "payops")
    (head,) = SCHEMA_HEADS
    assert f"at {head}" in _run([payops, "db", "upgrade"], cwd=project, env=home).stdout
    assert f"revision: {head}" in _run([payops, "db", "current"], cwd=project, env=home).stdout
