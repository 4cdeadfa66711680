"""payops as a worker host has it: the wheel built from this checkout, installed in a fresh virtual env.

The wheel is built from a copy of the sources (the build leaves nothing in the checkout) without build
isolation. payops' dependencies come from this test environment, after the fresh site-packages (a path line in
a .pth file: the editable install's own .pth files there are not processed, so the only payops the venv
imports is the wheel's). The package index is not needed, and no checkout is on the venv's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from payops import FOLDERS

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "payops", *FOLDERS)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``cmd`` in ``cwd`` without this environment's PYTHONPATH or VIRTUAL_ENV; fails with its output."""
    env = {k: v for k, v in (env or os.environ).items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


def build_wheel(base: Path) -> Path:
    """The payops wheel, built from a copy of this checkout's sources under ``base``."""
    source = base / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(src, source / name)
    dist = base / "dist"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
         str(source)], cwd=base)  # fmt: skip
    (wheel,) = dist.glob("payops-*.whl")
    return wheel


def wheel_venv(base: Path) -> Path:
    """A fresh venv under ``base`` with the payops wheel installed; its python."""
    wheel = build_wheel(base)
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=base)
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=base).stdout.strip())  # fmt: skip
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python
