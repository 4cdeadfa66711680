"""Payments Service credentials as a Prefect Block, and settings loading for tasks.

The Block keeps ``client_secret`` as a ``SecretStr``: Prefect stores it encrypted and shows it masked in
the UI and API; it never appears in a repr, a log line or an artifact.
"""

from __future__ import annotations

from typing import ClassVar

from payops.connectors.payments import PaymentsSettings
from payops.store.settings import PayopsSettings
from prefect.blocks.core import Block
from pydantic import Field, SecretStr, ValidationError

__all__ = ["PaymentsCredentials", "credentials_block_of", "load_settings"]


class PaymentsCredentials(Block):
    """Client credential of the Payments Service API (one environment, test or live)."""

    _block_type_name: ClassVar[str] = "Payments Credentials"
    _block_type_slug: ClassVar[str] = "payments-credentials"
    _description: ClassVar[str] = (
        "Client credentials (OAuth client id and secret) of the Payments Service API."
    )

    base_url: str = Field(default="http://127.0.0.1:8000", description="Base address of the API.")
    auth_url: str | None = Field(
        default=None, description="Identity service address; default {base_url}/auth."
    )
    client_id: str = Field(description="OAuth client id.")
    client_secret: SecretStr = Field(description="OAuth client secret.")
    resource: str = Field(default="urn:payments-api", description="Resource identifier of the service.")

    def to_settings(self, **overrides: object) -> PaymentsSettings:
        """``PaymentsSettings`` from this block; other settings (timeouts, retries) from ``overrides`` or
        ``PAYOPS_*`` env vars."""
        values: dict[str, object] = {
            "base_url": self.base_url,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "resource": self.resource,
        }
        if self.auth_url:
            values["auth_url"] = self.auth_url
        values.update(overrides)
        return PaymentsSettings(**values)  # type: ignore[arg-type]


class CredentialsMissing(ValueError):
    """No usable Payments credentials: names the missing settings, never their values."""


def settings_from_env() -> PaymentsSettings:
    """``PaymentsSettings`` from ``PAYOPS_*`` env vars, or ``CredentialsMissing`` naming what is absent."""
    try:
        return PaymentsSettings()  # type: ignore[call-arg]
    except ValidationError as exc:
        names = sorted({f"PAYOPS_{str(e['loc'][0]).upper()}" for e in exc.errors() if e.get("loc")})
        raise CredentialsMissing(
            "no Payments credentials: set " + ", ".join(names) + " or name a PaymentsCredentials block"
        ) from None


def credentials_block_of(block_name: str | None, payops: PayopsSettings | None) -> str | None:
    """The block a run reads its credential from: the one it names, else the process's
    ``PAYOPS_CREDENTIALS_BLOCK`` (``payops``: the flow's settings), else none (the ``PAYOPS_*`` variables)."""
    return block_name or (payops.credentials_block if payops is not None else None)


def load_settings(block_name: str | None = None, payops: PayopsSettings | None = None) -> PaymentsSettings:
    """Settings from the saved ``PaymentsCredentials`` block the run names (``block_name``) or the worker
    sets (`credentials_block_of`), else from ``PAYOPS_*`` env vars.

    Works from sync and async code (the block is read with Prefect's sync client).
    """
    name = credentials_block_of(block_name, payops)
    if name:
        block = PaymentsCredentials.load(name, _sync=True)  # type: ignore[call-arg]
        return block.to_settings()
    return settings_from_env()
