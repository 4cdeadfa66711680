"""Fixtures of the console tests: an emulator per module, a console in local single-process mode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deployments.console import ConsoleSettings, LocalLauncher, create_app
from sandbox import SandboxConfig, SandboxServer
from tests.deployments.console_harness import PASSWORD, serve_in_thread


@pytest.fixture(scope="module")
def emulator() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as server:
        yield server


@pytest.fixture
def console(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    for key, value in emulator.env.items():
        monkeypatch.setenv(key, value)
    settings = ConsoleSettings(
        console_password=PASSWORD,
        upload_url=str(tmp_path / "uploads"),
        report_url=str(tmp_path / "reports"),
        webhook_store=tmp_path / "seen.sqlite",
        max_upload_mb=1,
    )
    launcher = LocalLauncher()
    with serve_in_thread(create_app(settings, launcher=launcher)) as url:
        yield {"url": url, "launcher": launcher, "tmp": tmp_path}
    launcher.join(30)
