"""Prefect's login for the Prefect server `payops serve` runs: one shared auth string, in one place.

Prefect 3.8 puts its whole API behind a login when its server has ``PREFECT_SERVER_API_AUTH_STRING``: every
request but ``GET /health`` and ``/ready`` needs ``Authorization: Basic base64(auth string)``, which Prefect's
clients send when ``PREFECT_API_AUTH_STRING`` is set, and its UI asks for on a login page.

`payops serve` uses the configured ``PREFECT_SERVER_API_AUTH_STRING``, else a random one kept in the home's
``prefect-auth`` file (mode 0600, made once, reused across restarts; its path goes in the home's record). The
commands of the home read the login from that file (the host user owns the home). The auth string itself is
never printed, logged or put in an exception: only where it is.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from payops.store.home import ServeRecord

__all__ = [
    "LOGIN_FILE",
    "LOGIN_VARIABLES",
    "PrefectLogin",
    "PrefectLoginUnreadable",
    "children_use_prefect_login",
    "read_login_file",
    "serve_login",
    "serve_record_login",
    "without_prefect_login",
]

LOGIN_FILE = "prefect-auth"
LOGIN_VARIABLES = ("PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING")
"""Prefect's client-side and server-side login settings, as environment variables."""


class PrefectLoginUnreadable(RuntimeError):
    """The home's ``prefect-auth`` file cannot be read or is empty (the message names the file only)."""


@dataclass(frozen=True)
class PrefectLogin:
    """The auth string of a Prefect server and where it is kept (``file`` None: it is configured)."""

    auth_string: str
    file: Path | None

    def __repr__(self) -> str:  # the auth string never goes into a log or a traceback
        return f"PrefectLogin(auth_string='***', file={self.file!r})"

    def where(self) -> str:
        """Where the login is, as `payops serve` says it (never the auth string itself)."""
        if self.file is None:
            return "the configured PREFECT_SERVER_API_AUTH_STRING"
        return f"{self.file} (mode 0600)"


def _configured_server_auth_string() -> str | None:
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING

    return PREFECT_SERVER_API_AUTH_STRING.value() or None


def serve_login(home: Path) -> PrefectLogin:
    """The login of `payops serve`'s Prefect server: the configured ``PREFECT_SERVER_API_AUTH_STRING``, else
    the auth string of ``home``'s ``prefect-auth`` file, made (random, mode 0600) when there is none."""
    configured = _configured_server_auth_string()
    if configured:
        return PrefectLogin(configured, None)
    path = home / LOGIN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return PrefectLogin(read_login_file(path), path)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(secrets.token_urlsafe(32) + "\n")
    return PrefectLogin(read_login_file(path), path)


def read_login_file(path: Path) -> str:
    """The auth string kept in ``path``; :class:`PrefectLoginUnreadable` when it cannot be read or is
    empty."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PrefectLoginUnreadable(f"cannot read Prefect's login in {path}: {exc.strerror}") from None
    if not value:
        raise PrefectLoginUnreadable(
            f"Prefect's login file {path} is empty: remove it, and `payops serve` makes a new one"
        )
    return value


def serve_record_login(record: ServeRecord) -> str | None:
    """The auth string a command of the home sends to the running serve of ``record``: the one in the file
    the record names; when serve's login is configured instead, the configured ``PREFECT_API_AUTH_STRING``
    (None: Prefect's settings already hold it), else the configured ``PREFECT_SERVER_API_AUTH_STRING`` (the
    host's setting serve used)."""
    if record.prefect_auth_file:
        return read_login_file(Path(record.prefect_auth_file))
    from prefect.settings import PREFECT_API_AUTH_STRING

    if PREFECT_API_AUTH_STRING.value():
        return None
    return _configured_server_auth_string()


def without_prefect_login(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without Prefect's login settings, for a child that never talks to Prefect (the emulator)."""
    return {k: v for k, v in env.items() if k not in LOGIN_VARIABLES}


@contextmanager
def children_use_prefect_login(auth_string: str | None) -> Iterator[None]:
    """Children started inside the block send ``auth_string`` to the Prefect API
    (``PREFECT_API_AUTH_STRING`` in this process's environment, which they inherit; the previous value comes
    back when the block ends). ``None`` leaves the environment as it is (a configured login, or none).
    This process's own Prefect client reads Prefect's settings: callers pair this with
    ``prefect.settings.temporary_settings``, as :func:`deployments.processes.children_use_prefect_api`."""
    if auth_string is None:
        yield
        return
    previous = os.environ.get("PREFECT_API_AUTH_STRING")
    os.environ["PREFECT_API_AUTH_STRING"] = auth_string
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_AUTH_STRING", None)
        else:
            os.environ["PREFECT_API_AUTH_STRING"] = previous
