"""Emulator settings (``SandboxConfig``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .clock import Clock


class SandboxConfig(BaseModel):
    """How an emulator instance behaves. Every field has a default suited to tests."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rate_limit_per_s: float | None = Field(
        default=None, gt=0, description="Token-bucket refill per credential; None = off"
    )
    rate_burst: int | None = Field(
        default=None, ge=1, description="Bucket size; default max(1, rate_limit_per_s)"
    )
    fault_rate: float = Field(default=0.0, ge=0.0, le=1.0, description="Share of /v1 requests answered 5xx")
    fault_seed: int | None = Field(default=None, description="Seed of the fault RNG (deterministic faults)")
    fault_token_endpoint: bool = Field(default=False, description="Also inject faults on the token endpoint")
    latency_ms: int = Field(default=0, ge=0, description="Added latency per /v1 request")
    token_ttl_s: int = Field(default=300, ge=1, description="Access token lifetime (expires_in)")
    delivery_delay_s: float = Field(default=2.0, ge=0, description="Payout final status after this delay")
    settlement_delay_s: float | None = Field(
        default=None, ge=0, description="Run duration; default = delivery_delay_s"
    )
    clock: Clock | None = Field(default=None, description="Time source; default SystemClock")
    seed_file: Path | None = Field(default=None, description="JSON file with businesses (see README)")
    history_payouts: int = Field(
        default=0,
        ge=0,
        le=2_000_000,
        description="Delivered payouts of the day before in the demo business's test environment (a past)",
    )
    allow_local_webhooks: bool = False
    checkout_configured: bool = True
    events_lag_s: float = Field(
        default=2.0, ge=0, description="GET /v1/events shows an event this long after it"
    )
    webhook_worker: bool | None = Field(
        default=None,
        description="Background webhook delivery; None = on with a system clock, off with a ManualClock",
    )
    jwt_secret: str | None = Field(default=None, description="HS256 key; random per app when None")

    @property
    def effective_settlement_delay_s(self) -> float:
        """Duration of a settlement run."""
        return self.delivery_delay_s if self.settlement_delay_s is None else self.settlement_delay_s

    @property
    def effective_burst(self) -> int:
        """Size of each credential's token bucket."""
        if self.rate_burst is not None:
            return self.rate_burst
        return max(1, int(self.rate_limit_per_s or 1))
