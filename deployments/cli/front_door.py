"""The CLI as a client of the payops server: the one front door for people.

When the CLI knows a server (``PAYOPS_URL``, else the `payops serve` this home's record names), every command
that acts for a person calls the server's JSON API (`deployments/console/api`) with that person's own
credential, and the server checks their role, signs what needs signing and audits it. The person's machine
then needs no database, no key and no service credential: only the server's address and their token.

Who is calling, first match:
* ``--user NAME`` where a command offers it: the password is asked (hidden) and sent for that call only;
* ``PAYOPS_API_TOKEN``: a personal token;
* the token `payops login` saved for that server in this person's config (`PayopsSettings.logins_file`,
  mode 0600).

Refusals keep the CLI's contract (docs/cli.md): one line on stderr; exit 2 for what the caller can fix (not
logged in, not allowed, unknown run, invalid input, conflict), 1 when the server fails or cannot be reached.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import httpx
import typer
from payops.deployments.cli._common import EXIT_ERROR, EXIT_INVALID, fail

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

API = "/api/v1"
TIMEOUT_S = 60.0
NO_SERVER = (
    "no payops server known: set PAYOPS_URL to the server (or start `payops serve` for this home); "
    "people act through the server, which checks roles and holds the keys"
)


class ServerRefused(Exception):
    """The server answered with an error: its status and its one-line ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def server_url(settings: PayopsSettings) -> str | None:
    """The payops server this CLI is a client of: ``PAYOPS_URL``, else the console of the `payops serve`
    running for this home (its record), else None."""
    if settings.url:
        return settings.url.rstrip("/")
    from payops.store.home import read_serve_record

    record = read_serve_record(settings.home.expanduser())
    return record.console_url.rstrip("/") if record is not None else None


# -- the tokens `payops login` keeps ---------------------------------------------------------------------
def saved_logins(settings: PayopsSettings) -> dict[str, dict[str, str]]:
    """Server URL → ``{"token", "user"}`` (an unreadable file counts as none)."""
    try:
        data = json.loads(settings.logins_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write_logins(settings: PayopsSettings, logins: dict[str, dict[str, str]]) -> Path:
    """Replace the file atomically, mode 0600 (its folder 0700): it holds tokens."""
    path = settings.logins_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(logins, fh, indent=2)
    os.replace(partial, path)
    return path


def save_login(settings: PayopsSettings, url: str, token: str, user: str) -> Path:
    return _write_logins(settings, {**saved_logins(settings), url: {"token": token, "user": user}})


def forget_login(settings: PayopsSettings, url: str) -> bool:
    logins = saved_logins(settings)
    if url not in logins:
        return False
    del logins[url]
    _write_logins(settings, logins)
    return True


# -- calling the server ----------------------------------------------------------------------------------
@dataclass
class FrontDoor:
    """An API client for one command: the server's URL and the caller's credential."""

    url: str
    client: httpx.Client

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer to ``method path``; :class:`ServerRefused` for an error or no answer."""
        try:
            answer = self.client.request(method, f"{API}{path}", **kwargs)
        except httpx.HTTPError as exc:
            reason = f"the payops server at {self.url} did not answer ({type(exc).__name__})"
            raise ServerRefused(0, reason) from None
        if answer.status_code >= 400:
            raise ServerRefused(answer.status_code, _detail(answer))
        return answer

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of ``method path`` (:meth:`send`)."""
        answer = self.send(method, path, **kwargs)
        if not answer.content:
            return None
        try:
            return answer.json()
        except ValueError:  # a web page, a proxy's answer: never shown to the person, never a traceback
            kind = answer.headers.get("content-type", "no content type").split(";")[0]
            raise ServerRefused(
                0, f"{self.url} answered {kind}, not the payops API: is PAYOPS_URL the payops server?"
            ) from None

    def sign_in(self, user: str, password: str, purpose: str) -> dict[str, Any]:
        """A personal token for ``user`` (their password, sent once); later calls carry it."""
        issued = self.call("POST", "/login", json={"purpose": purpose}, auth=httpx.BasicAuth(user, password))
        self.client.headers["Authorization"] = f"Bearer {issued['token']}"
        return issued

    def sign_out(self) -> None:
        """Revoke the token this door carries. Best effort: the command's work is done either way, and an
        admin can revoke a token left behind (`payops users tokens`)."""
        try:
            self.send("POST", "/logout")
        except ServerRefused as exc:
            typer.echo(f"note: the command's token was not revoked: {exc.detail}", err=True)


def _detail(answer: httpx.Response) -> str:
    """The server's one line (its ``detail``); the HTTP status only when the server failed."""
    try:
        detail = answer.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else answer.reason_phrase
    if answer.status_code < 500:
        return text
    return f"the payops server failed: {text} (HTTP {answer.status_code})"


FIXABLE = frozenset({400, 401, 403, 404, 409, 413, 422, 429})
"""Refusals the caller can act on (exit 2, as invalid input); any other error exits 1."""


def refused(exc: ServerRefused) -> NoReturn:
    """The server's refusal as the CLI's one line and exit code."""
    hint = " (log in with `payops login`, or set PAYOPS_API_TOKEN)" if exc.status == 401 else ""
    fail(exc.detail + hint, EXIT_INVALID if exc.status in FIXABLE else EXIT_ERROR)


def _saved_token(settings: PayopsSettings, url: str) -> str:
    token = settings.api_token.get_secret_value().strip() if settings.api_token else ""
    return token or saved_logins(settings).get(url, {}).get("token", "")


@contextmanager
def front_door(settings: PayopsSettings, *, user: str | None = None) -> Iterator[FrontDoor | None]:
    """The server's API as the caller (see the module docstring), or None when no server is known. With
    ``user``, the password is asked once and exchanged for a token this command uses and revokes at its end
    (the server checks a password slowly on purpose: once, not on every call)."""
    url = server_url(settings)
    if url is None:
        yield None
        return
    with httpx.Client(base_url=url, timeout=TIMEOUT_S) as client:
        door = FrontDoor(url, client)
        if not user:
            token = _saved_token(settings, url)
            if token:
                client.headers["Authorization"] = f"Bearer {token}"
            yield door
            return
        from payops.deployments.cli.identity import read_password

        try:
            door.sign_in(user, read_password(), "one command")
        except ServerRefused as exc:
            refused(exc)
        try:
            yield door
        finally:
            door.sign_out()


@contextmanager
def server_only(settings: PayopsSettings, *, user: str | None = None, local: str = "") -> Iterator[FrontDoor]:
    """:func:`front_door`, for commands only the server may carry out: without a server, one line saying
    so (and ``local``, the host command that does it on the server host, when there is one)."""
    with front_door(settings, user=user) as door:
        if door is None:
            fail(NO_SERVER + (f"; on the server host: {local}" if local else ""), EXIT_INVALID)
        yield door


def ask(door: FrontDoor, method: str, path: str, **kwargs: Any) -> Any:
    """``door.call``; a refusal ends the command with its one line."""
    try:
        return door.call(method, path, **kwargs)
    except ServerRefused as exc:
        refused(exc)
