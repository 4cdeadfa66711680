"""Client settings, read from ``PAYOPS_*`` environment variables by pydantic-settings."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["PaymentsSettings"]


class PaymentsSettings(BaseSettings):
    """Where the service is, which credential to use, and the client's time and retry budget.

    ``client_secret`` is a ``SecretStr``: it never shows in ``repr``/``str`` or in a model dump.
    ``auth_url`` defaults to ``{base_url}/auth`` (contract.md: the emulator serves both on one port).
    """

    model_config = SettingsConfigDict(env_prefix="PAYOPS_", extra="ignore", frozen=True)

    base_url: str = "http://127.0.0.1:8000"
    auth_url: str | None = None
    client_id: str
    client_secret: SecretStr
    resource: str = "urn:payments-api"

    timeout_s: float = Field(default=30.0, gt=0, description="Read/write/pool timeout per request.")
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20, description="Retries after the first attempt.")
    backoff_base_s: float = Field(default=0.5, ge=0, description="First back-off delay; doubles each retry.")
    backoff_max_s: float = Field(default=30.0, ge=0, description="Cap of one back-off delay.")
    max_retry_wait_s: float = Field(
        default=120.0, ge=0, description="Give up instead of sleeping longer than this (e.g. Retry-After)."
    )
    token_renew_margin_s: float = Field(default=30.0, ge=0, description="Renew this long before expiry.")
    max_connections: int = Field(default=20, ge=1)
    user_agent: str = "payops-payments-client/0.1"

    @field_validator("base_url", "auth_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @property
    def token_url(self) -> str:
        """``{auth_url}/v1/oauth/token``."""
        return f"{self.auth_url or self.base_url + '/auth'}/v1/oauth/token"
