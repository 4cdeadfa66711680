"""Fixtures of the console tests: an emulator per module, a console in local single-process mode with an
operator ``olu`` and an approver ``bea`` (password ``PASSWORD``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from payops.sandbox import SandboxConfig, SandboxServer

from tests.deployments.browser_harness import local_console
from tests.deployments.console_harness import PASSWORD, serve_in_thread


@pytest.fixture(scope="module")
def emulator() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as server:
        yield server


@pytest.fixture
def console(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    app, launcher = local_console(tmp_path, emulator, monkeypatch, max_upload_mb=1)
    app.state.console.users.add("olu", "operator", PASSWORD)
    app.state.console.users.add("bea", "approver", PASSWORD)
    with serve_in_thread(app) as url:
        yield {"url": url, "launcher": launcher, "tmp": tmp_path}
    launcher.join(30)
