"""Parameters every sheet-driven run shares (payouts, utility purchases)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SheetRunParams(BaseModel):
    """A sheet, the run's label, where reports go and how to reach the service."""

    source: str = Field(description="The sheet: local path or fsspec URL (.xlsx, .xlsm, .csv)")
    label: str | None = Field(
        None,
        description="Run label. Default: a fingerprint of the sheet's content, so the same sheet replays.",
    )
    report_dir: str = Field("reports", description="Folder or fsspec URL for the reports")
    credentials_block: str | None = Field(
        None, description="PaymentsCredentials block name; default: env vars"
    )
    rate_limit_per_s: float = Field(
        1000,
        gt=0,
        description=(
            "Ceiling of the adaptive request rate (per second) used when no `payments-api` global concurrency"
            " limit exists: below it the rate follows the service's 429s"
        ),
    )
    default_country_code: str = Field("233", pattern=r"^\d{1,3}$")
