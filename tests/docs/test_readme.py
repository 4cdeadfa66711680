"""The README says where the demo's reports land (the demo's own home) and that CLI commands beside
`payops serve --sandbox` need the emulator's credentials (issue 47)."""

from __future__ import annotations

import inspect
from pathlib import Path

from payops.deployments import demo

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_says_where_the_demo_reports_land() -> None:
    reports = demo.DEMO_HOME / "reports"
    assert 'DEMO_HOME / "reports"' in inspect.getsource(demo.main)  # the demo writes them there
    assert f"`{reports.relative_to(ROOT)}/`" in README


def test_the_readme_points_cli_users_of_serve_to_the_sandbox_credentials() -> None:
    assert "source $PAYOPS_HOME/sandbox.env" in README
    assert "docs/operations.md#local-all-in-one-payops-serve-make-serve" in README
