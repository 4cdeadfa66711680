"""payops' own settings: the one place ``PAYOPS_*`` variables are read (pydantic-settings).

Entry points (each CLI command, `payops serve`, the console's app factory, each flow at its start) read them
once with :meth:`PayopsSettings.from_env` and pass the object on; code below them takes what it needs as an
argument and never reads the environment itself (`tests/architecture/test_settings_reads.py`). The client's
own settings (service address, credential, retry budget) are `connectors.payments.PaymentsSettings`;
Prefect's ``PREFECT_*`` variables are Prefect's settings.

An empty variable counts as unset, as it always did (``PAYOPS_HOME=`` means the default home).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DATABASE_FILE", "PayopsSettings", "SettingsError", "absolute_location"]

DATABASE_FILE = "payops.sqlite3"
AUDIT_KEY_FILE, MIN_AUDIT_KEY_LENGTH = "audit.key", 16


def _default_home() -> Path:
    return Path.home() / ".payops"


class PayopsSettings(BaseSettings):
    """Where payops keeps its files and database, where its reports and console are, which keys it signs
    and verifies with. Secrets are ``SecretStr``: never in a ``repr``, a log or a dump."""

    model_config = SettingsConfigDict(
        env_prefix="PAYOPS_", extra="ignore", frozen=True, env_ignore_empty=True
    )

    home: Path = Field(default_factory=_default_home, description="The payops home (default ~/.payops)")
    database_url: str | None = Field(
        None, description="The payops database; default: the SQLite file payops.sqlite3 under the home"
    )
    report_url: str | None = Field(
        None, description="Report root (folder or fsspec URL); default: the reports folder under the home"
    )
    console_url: str | None = Field(None, description="The console's address for links in reports and alerts")
    prefect_ui_url: str | None = Field(None, description="Prefect UI address for run links")
    approval_signing_key_file: Path | None = Field(
        None,
        description="The payops server's Ed25519 private key signing run starts and approvals (PKCS8 PEM, "
        "mode 0600); default: approval-signing-key.pem in the home",
    )
    approval_verify_key: str | None = Field(
        None,
        repr=False,
        description="The approval key's public half as PEM text, which flows verify with (workers configured "
        "by environment); default: PAYOPS_APPROVAL_VERIFY_KEY_FILE",
    )
    approval_verify_key_file: Path | None = Field(
        None,
        description="File of the approval key's public half (PEM); default: approval-verify-key.pem in the "
        "home",
    )
    audit_key: SecretStr | None = Field(
        None, description="Key of the audit chain; default: the file audit.key in the home"
    )
    api_token: SecretStr | None = Field(None, description="A payops user's personal API token (the CLI)")
    approval_wait: Literal["pause", "suspend"] = Field(
        "pause",
        description="How a deployment's payout run waits for approval: `suspend` ends its process (no worker "
        "slot held; it resumes on any worker once decided; deadlines and reminders need the "
        "approval-deadlines deployment), `pause` waits in its process (payops serve, CLI runs)",
    )
    url: str | None = Field(
        None, description="The payops server the CLI is a client of (default: this home's `payops serve`)"
    )
    config_dir: Path | None = Field(
        None, description="Where `payops login` keeps tokens (default: $XDG_CONFIG_HOME/payops)"
    )
    alerts_block: str | None = Field(None, description="Notification block alerts are sent through")
    credentials_block: str | None = Field(
        None,
        description="The PaymentsCredentials block a flow reads the service's credential from when its run "
        "names none: a worker's setting, so a run started with only its sheet and label still pays",
    )
    events_lag_alert_minutes: float = Field(
        15.0, ge=0, description="Age of a caught-up event at which the events feed counts as lagging"
    )
    paid_before_days: int = Field(
        30,
        ge=0,
        description="A sheet, or rows of it (same payee number, amount and currency), that a run sent within "
        "this many days is shown as paid before on the upload preview, the approval page and `payops check`; "
        "paying it under another label needs the approver's acknowledgement (0: not looked up)",
    )
    stream_csv_over_bytes: int = Field(
        1024 * 1024,  # about 17,000 realistic rows
        ge=0,
        description="A csv payout sheet larger than this is read in chunks into a spill file and paid a part "
        "at a time, in memory that does not grow with its rows (0: every csv)",
    )

    @classmethod
    def from_env(cls) -> Self:
        """The settings as the environment states them now (an entry point calls this once). A bad value is
        a :class:`SettingsError` naming the variable and what is allowed."""
        try:
            return cls()
        except ValidationError as exc:
            raise SettingsError(settings_problems(exc, cls.model_config.get("env_prefix", ""))) from None

    def home_dir(self) -> Path:
        """The payops home, made when missing (mode 0700)."""
        home = self.home.expanduser()
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        return home

    @property
    def database(self) -> str:
        """The payops database's URL: ``PAYOPS_DATABASE_URL``, else a SQLite file under the home."""
        return self.database_url or f"sqlite:///{self.home_dir() / DATABASE_FILE}"

    @property
    def reports(self) -> str:
        """Where reports go when no folder is given: ``PAYOPS_REPORT_URL`` (a folder or fsspec URL, made
        absolute), else the ``reports`` folder under the home; never the working directory."""
        if self.report_url:
            return absolute_location(self.report_url)
        return str(self.home_dir() / "reports")

    @property
    def console(self) -> str | None:
        """The configured console address without a trailing slash, or None."""
        value = (self.console_url or "").strip().rstrip("/")
        return value or None

    def logins_file(self) -> Path:
        """Where `payops login` keeps this person's tokens, one per server (their own config, never the
        payops home): ``PAYOPS_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/payops``, else ``~/.config/payops``."""
        xdg = os.environ.get("XDG_CONFIG_HOME")
        base = self.config_dir or (Path(xdg) if xdg else Path.home() / ".config") / "payops"
        return base.expanduser() / "logins.json"

    def audit_key_bytes(self) -> bytes:
        """The audit chain's key: ``PAYOPS_AUDIT_KEY`` (every host writing one shared database sets the same),
        else ``audit.key`` in the home, made on first use (mode 0600)."""
        if self.audit_key is not None:
            value = self.audit_key.get_secret_value()
            if len(value) < MIN_AUDIT_KEY_LENGTH:
                raise ValueError(f"PAYOPS_AUDIT_KEY is too short: at least {MIN_AUDIT_KEY_LENGTH} characters")
            return value.encode()
        path = self.home_dir() / AUDIT_KEY_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes().strip()
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        return path.read_bytes().strip()


class SettingsError(ValueError):
    """A ``PAYOPS_*`` variable with a value payops cannot use; the message names it (never its value)."""


def settings_problems(exc: ValidationError, prefix: str) -> str:
    """``PAYOPS_X: problem; ...`` for a settings ValidationError (values left out: they may be secrets)."""
    return "; ".join(
        f"{prefix}{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors(include_input=False)
    )


def absolute_location(location: str) -> str:
    """A local folder made absolute (an fsspec URL unchanged), without a trailing slash."""
    if "://" in location:
        return location.rstrip("/")
    return os.path.abspath(os.path.expanduser(location))
