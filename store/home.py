"""The payops home and the record `payops serve` keeps in it of what it runs.

A home (``PAYOPS_HOME``, default ``~/.payops``: `store.settings.PayopsSettings.home_dir`) is the unit of
isolation: the payops database (users, audit, lookup caches), the approval key pair, the reports, the
emulator's client settings and `payops serve`'s Prefect server with its database all live under it. A command
run with a home finds that home's `payops serve` in the record (``serve.json``), never by trying a shared
address another home may own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

RECORD_NAME = "serve.json"
STOPPED_RECORD_NAME = "serve.stopped.json"
"""The record of the last serve that stopped cleanly: its ports are taken again (links keep working)."""

__all__ = [
    "RECORD_NAME",
    "ServeRecord",
    "clear_serve_record",
    "last_ports",
    "host_actor",
    "read_serve_record",
    "record_path",
    "write_serve_record",
]


class ServeRecord(BaseModel):
    """Where the parts of one running `payops serve` are (addresses on 127.0.0.1 unless configured)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    pid: int
    prefect_api_url: str
    prefect_ui_url: str | None = None
    console_url: str
    sandbox_url: str | None = None
    sandbox_env_file: str | None = None  # the emulator's client settings (export lines)
    approval_verify_key_file: str | None = None  # the approval key's public half; None: configured elsewhere
    prefect_auth_file: str | None = None  # Prefect's login; None: configured, or not serve's own server
    ports: dict[str, int] = {}

    def lines(self) -> list[str]:
        """Where everything is, as serve prints it."""
        ui = self.prefect_ui_url or self.prefect_api_url
        out = [f"Prefect UI: {ui} (API {self.prefect_api_url})", f"console: {self.console_url}"]
        if self.sandbox_url:
            out.append(f"emulator: {self.sandbox_url} (client settings: {self.sandbox_env_file})")
        if self.approval_verify_key_file:
            out.append(f"approval verify key: {self.approval_verify_key_file}")
        if self.prefect_auth_file:
            out.append(f"Prefect login (the Prefect UI asks for it): {self.prefect_auth_file}")
        return out


def host_actor() -> str:
    """Who a command run on the server host without the server acts as, in the audit trail: the host account
    running it, by its uid from the kernel (never a name from the environment, which anyone may set)."""
    return f"host:{os.getuid()}"


def record_path(home: Path) -> Path:
    return home / RECORD_NAME


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def read_serve_record(home: Path, *, running: bool = True) -> ServeRecord | None:
    """The record of this home's `payops serve`; None when there is none, when it cannot be read, or (with
    ``running``) when the process that wrote it is gone (a serve that was killed leaves its record)."""
    try:
        record = ServeRecord.model_validate(json.loads(record_path(home).read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError):
        return None
    if running and not _running(record.pid):
        return None
    return record


def write_serve_record(record: ServeRecord, home: Path) -> Path:
    """Write ``record`` (mode 0600; replaced atomically, so a reader never sees half of it)."""
    path = record_path(home)
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(record.model_dump_json(indent=2) + "\n")
    os.replace(partial, path)
    return path


def clear_serve_record(pid: int, home: Path) -> None:
    """Retire the record when process ``pid`` wrote it (a second serve's record is never touched): it is
    kept as :data:`STOPPED_RECORD_NAME`, which no command takes for a running serve, for its ports."""
    record = read_serve_record(home, running=False)
    if record is not None and record.pid == pid:
        os.replace(record_path(home), home / STOPPED_RECORD_NAME)


def last_ports(home: Path) -> dict[str, int]:
    """The ports the home's last `payops serve` used: its record's (a serve that was killed leaves it), else
    the record of the last one that stopped cleanly; none for a home that never served."""
    record = read_serve_record(home, running=False)
    if record is None:
        try:
            text = (home / STOPPED_RECORD_NAME).read_text(encoding="utf-8")
            record = ServeRecord.model_validate(json.loads(text))
        except (OSError, ValueError, ValidationError):
            return {}
    return dict(record.ports)
