"""deployments/prefect_login.py: where `payops serve`'s Prefect login comes from, how the commands of its
home find it, and that it is never shown; deployments/prefect_server.py gives it to this process and its
children, and finds no server where none runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.deployments.prefect_login import (
    LOGIN_FILE,
    PrefectLogin,
    PrefectLoginUnreadable,
    children_use_prefect_login,
    read_login_file,
    serve_login,
    serve_record_login,
    without_prefect_login,
)
from payops.store.home import ServeRecord, write_serve_record
from payops.store.settings import PayopsSettings


@pytest.fixture
def no_prefect_login(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Prefect API nor login configured here (even after a test that ran the session's harness)."""
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_SERVER_API_AUTH_STRING,
        temporary_settings,
    )

    for name in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING"):
        monkeypatch.delenv(name, raising=False)
    reset = {PREFECT_API_URL, PREFECT_API_AUTH_STRING, PREFECT_SERVER_API_AUTH_STRING}
    with temporary_settings(restore_defaults=reset):
        yield


def test_serve_makes_a_random_login_once_in_a_0600_file_and_reuses_it(
    tmp_path: Path, no_prefect_login: None
) -> None:
    tmp_path.chmod(0o755)
    previous = os.umask(0o022)
    try:
        first = serve_login(tmp_path)
    finally:
        os.umask(previous)
    assert first.file == tmp_path / LOGIN_FILE and first.file.stat().st_mode & 0o777 == 0o600
    assert len(first.auth_string) >= 32 and first.file.read_text().strip() == first.auth_string
    assert serve_login(tmp_path) == first  # a restart keeps the login (the UI's stored one still works)
    other = tmp_path / "other-home"
    other.mkdir()
    assert serve_login(other).auth_string != first.auth_string  # another home, another login
    assert first.auth_string not in repr(first) and first.auth_string not in first.where()
    assert first.where() == f"{first.file} (mode 0600)"


def test_a_configured_server_login_wins_and_no_file_is_made(tmp_path: Path, no_prefect_login: None) -> None:
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    with temporary_settings({PREFECT_SERVER_API_AUTH_STRING: "configured-login-0123456789"}):
        login = serve_login(tmp_path)
    assert login == PrefectLogin("configured-login-0123456789", None)
    assert not (tmp_path / LOGIN_FILE).exists()
    assert login.where() == "the configured PREFECT_SERVER_API_AUTH_STRING"


def test_an_unreadable_or_empty_login_file_is_named_without_its_content(tmp_path: Path) -> None:
    path = tmp_path / LOGIN_FILE
    with pytest.raises(PrefectLoginUnreadable, match="cannot read Prefect's login in"):
        read_login_file(path)
    path.write_text("\n")
    with pytest.raises(PrefectLoginUnreadable, match="is empty: remove it"):
        read_login_file(path)


def test_a_command_reads_the_login_the_record_names(tmp_path: Path, no_prefect_login: None) -> None:
    login = serve_login(tmp_path)
    record = ServeRecord(
        pid=os.getpid(),
        prefect_api_url="http://127.0.0.1:9/api",
        console_url="http://127.0.0.1:9",
        prefect_auth_file=str(login.file),
    )
    assert serve_record_login(record) == login.auth_string
    assert f"Prefect login (the Prefect UI asks for it): {login.file}" in record.lines()
    configured = record.model_copy(update={"prefect_auth_file": None})
    assert serve_record_login(configured) is None  # serve's login configured, none here: Prefect's settings

    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    with temporary_settings({PREFECT_SERVER_API_AUTH_STRING: "host-login-0123456789"}):
        assert serve_record_login(configured) == "host-login-0123456789"  # the host's setting serve used


def test_children_inherit_the_login_only_inside_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "before")
    with children_use_prefect_login("inside"):
        assert os.environ["PREFECT_API_AUTH_STRING"] == "inside"
    assert os.environ["PREFECT_API_AUTH_STRING"] == "before"
    with children_use_prefect_login(None):
        assert os.environ["PREFECT_API_AUTH_STRING"] == "before"
    env = {"PREFECT_API_AUTH_STRING": "a", "PREFECT_SERVER_API_AUTH_STRING": "b", "PAYOPS_HOME": "h"}
    assert without_prefect_login(env) == {"PAYOPS_HOME": "h"}


def test_use_prefect_api_gives_this_process_and_its_children_the_api_and_its_login(
    no_prefect_login: None,
) -> None:
    from payops.deployments.prefect_server import use_prefect_api
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL

    with use_prefect_api("http://127.0.0.1:9/api", "the-login-0123456789"):
        assert PREFECT_API_URL.value() == "http://127.0.0.1:9/api"
        assert PREFECT_API_AUTH_STRING.value() == "the-login-0123456789"
        assert os.environ["PREFECT_API_AUTH_STRING"] == "the-login-0123456789"
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:9/api"
    assert PREFECT_API_AUTH_STRING.value() is None and "PREFECT_API_AUTH_STRING" not in os.environ
    assert not PREFECT_API_URL.value() and "PREFECT_API_URL" not in os.environ


def test_no_server_is_found_or_started_where_none_runs(tmp_path: Path, no_prefect_login: None) -> None:
    from payops.deployments.prefect_server import ServeUnreachable, running_prefect_api

    settings = PayopsSettings(home=tmp_path)
    with running_prefect_api(settings) as api:
        assert api is None
    # A recorded serve that does not answer is said, not replaced by a temporary server.
    write_serve_record(
        ServeRecord(pid=os.getpid(), prefect_api_url="http://127.0.0.1:9/api", console_url="http://x"),
        tmp_path,
    )
    with pytest.raises(ServeUnreachable), running_prefect_api(settings):
        pass
