"""A hostile sheet costs the console one 4xx page, never the process: dimension/structure bombs refused at
upload, a parser killed by a signal turned into a 422 page, /healthz answering right after each."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import httpx
import payops.tasks.intake.safety as safety
import pytest
from payops.deployments.console import ConsoleSettings, create_app
from payops.flows.payouts import PayoutRunParams

from tests.deployments.console_harness import PASSWORD, good_sheet, serve_in_thread
from tests.tasks.intake.bombs import BOMBS, far_corner


class NoRuns:
    """Launcher for upload-only tests: starting a run is a test failure."""

    mode = "deployment"

    async def start(self, params: PayoutRunParams, run_name: str) -> UUID:
        raise AssertionError("no run may start from a refused sheet")


def _token(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[httpx.Client]:
    """A logged-in client of a console served by uvicorn in this process."""
    settings = ConsoleSettings(
        database_url=f"sqlite:///{tmp_path / 'payops.sqlite3'}",
        upload_url=str(tmp_path / "uploads"),
        report_url=str(tmp_path / "reports"),
    )
    app = create_app(settings, launcher=NoRuns())
    app.state.console.users.add("olu", "operator", PASSWORD)
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url, timeout=60, follow_redirects=True) as client:
            token = _token(client.get("/login").text)
            login = {"username": "olu", "password": PASSWORD, "csrf_token": token}
            assert client.post("/login", data=login).status_code == 200
            yield client


def _upload(client: httpx.Client, path: Path) -> httpx.Response:
    token = _token(client.get("/").text)
    with path.open("rb") as fh:
        return client.post("/upload", data={"csrf_token": token}, files={"sheet": (path.name, fh)})


@pytest.mark.parametrize("name", BOMBS, ids=list(BOMBS))
def test_each_bomb_gets_a_4xx_page_and_the_console_stays_up(
    name: str, console: httpx.Client, tmp_path: Path
) -> None:
    build, message = BOMBS[name]
    r = _upload(console, build(tmp_path / f"{uuid4().hex[:8]}.xlsx"))
    assert 400 <= r.status_code < 500
    assert message.replace('"', "&#34;") in r.text or message in r.text
    assert "Traceback" not in r.text and "panicked" not in r.text
    assert console.get("/healthz").json()["status"] == "ok"


def test_a_parser_killed_by_a_signal_is_a_422_page_and_the_console_stays_up(
    console: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(safety, "refuse_absurd_shape", lambda *args: None)  # let calamine see it
    r = _upload(console, far_corner(tmp_path / "far.xlsx"))
    assert r.status_code == 422
    assert "the file could not be read safely: the parser was stopped by SIG" in r.text
    assert console.get("/healthz").json()["status"] == "ok"
    r = _upload(console, good_sheet(tmp_path / "good.xlsx"))  # the next upload is read as usual
    assert r.status_code == 200 and "6 rows" in r.text
