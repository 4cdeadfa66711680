"""Console settings, read from ``PAYOPS_*`` environment variables: payops' own (`store.settings`) and the
console's."""

from __future__ import annotations

from pathlib import Path

from payops.store.settings import PayopsSettings
from payops.tasks.events.payment_events import DEFAULT_FORWARD, ForwardFilter
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict


def prefect_home() -> Path:
    """Prefect's home folder (``PREFECT_HOME``), where the console keeps its small state files."""
    from prefect.settings import PREFECT_HOME

    return Path(PREFECT_HOME.value()).expanduser()


class ConsoleSettings(PayopsSettings):
    """Everything the console needs (payops' settings and its own); secrets are ``SecretStr`` and never
    rendered. Not frozen: a test moves a session's clock by lowering a timeout."""

    model_config = SettingsConfigDict(
        env_prefix="PAYOPS_", extra="ignore", frozen=False, env_ignore_empty=True
    )

    console_session_key: SecretStr | None = Field(
        None, description="Key signing CSRF tokens; default: random per process (set it for replicas)"
    )
    console_secure_cookies: bool = Field(False, description="Mark cookies Secure (behind HTTPS)")
    console_session_ttl_s: int = Field(8 * 3600, ge=60, description="Absolute session lifetime")
    console_idle_timeout_s: int = Field(30 * 60, ge=60, description="A session unused this long ends")
    console_trusted_proxies: str = Field(
        "", description="Comma-separated proxy addresses/networks whose X-Forwarded-For is believed"
    )
    upload_url: str | None = Field(
        None, description="Folder or fsspec URL for uploaded sheets; default: uploads under the payops home"
    )
    max_upload_mb: float = Field(20, gt=0, description="Largest sheet accepted")
    payout_deployment: str | None = Field(
        None, description="Deployment that pays sheets ('payout-spreadsheet/NAME'); unset: local mode"
    )
    warm_runs: bool = Field(
        False,
        description="Hand each payout run the console starts to a process with the flow imported already "
        "(deployments/warm_runs.py; `payops serve` turns it on for its own runner's host)",
    )
    credentials_block: str | None = Field(None, description="PaymentsCredentials block passed to runs")
    webhook_secrets: SecretStr | None = Field(None, description="Comma-separated webhook signing secrets")
    webhook_forward: str = Field(
        DEFAULT_FORWARD, description="Events forwarded to Prefect: '<type glob>[:<status>|...]' rules, or '*'"
    )
    webhook_backlog_limit: int = Field(
        20_000, ge=1, description="Unforwarded inbox rows at which deliveries get 503 + Retry-After"
    )
    webhook_retry_after_s: int = Field(60, ge=1, description="Retry-After of a 503 at the backlog limit")
    webhook_lease_s: float = Field(
        30, gt=0, description="Seconds a relay owns rows it sends before another relay may retry them"
    )

    @field_validator("webhook_forward")
    @classmethod
    def _forward_rules(cls, value: str) -> str:
        ForwardFilter(value)  # raises ValueError naming the bad rule
        return value

    @property
    def uploads(self) -> str:
        """Where uploaded sheets go: ``PAYOPS_UPLOAD_URL``, else ``uploads`` under the payops home. Each
        console run reports under `reports`, and the console serves every file under it at /reports/..."""
        return self.upload_url or str(self.home_dir() / "uploads")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    def webhook_secret_list(self) -> list[str]:
        """Signing secrets (old and new during a rotation); empty when the receiver is not configured."""
        raw = self.webhook_secrets.get_secret_value() if self.webhook_secrets else ""
        return [s.strip() for s in raw.split(",") if s.strip()]

    def ui_url(self) -> str | None:
        """Prefect UI base address: configured, else Prefect's own ``PREFECT_UI_URL`` setting."""
        if self.prefect_ui_url:
            return self.prefect_ui_url.rstrip("/")
        from prefect.settings import PREFECT_UI_URL

        value = PREFECT_UI_URL.value()
        return str(value).rstrip("/") if value else None
