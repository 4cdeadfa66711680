"""Parameters every sheet-driven run shares (payouts, utility purchases)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prefect import get_run_logger
from pydantic import BaseModel, Field

from tasks.intake import IntakeOptions
from tasks.progress import progress
from tasks.reports import ensure_reports_spare_source
from tasks.run_meter import RunMeter


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


@dataclass(frozen=True)
class SheetRunStart:
    """What a sheet-driven run starts with: its run logger, meter, intake options and start time."""

    logger: Any
    meter: RunMeter
    options: IntakeOptions
    started_wall: datetime


def start_sheet_run(params: SheetRunParams) -> SheetRunStart:
    """The prologue every sheet-driven flow shares: the progress phase ``reading``, reports that must not
    overwrite the sheet (when the label is given; the flows check again once the label is known)."""
    start = SheetRunStart(
        get_run_logger(),
        RunMeter(),
        IntakeOptions(default_country_code=params.default_country_code),
        datetime.now(UTC),
    )
    progress().phase("reading")
    if params.label:
        ensure_reports_spare_source(params.report_dir, params.label, params.source)
    return start
