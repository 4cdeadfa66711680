"""Parameters every sheet-driven run shares (payouts, utility purchases), and the run's name and tags.

Each field is one plain type with a default (an empty string means "the default"), so Prefect's run form shows
one input per field, never a type toggle; descriptions are written for the operator who fills that form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Annotated, Any

from payops.tasks.intake import IntakeOptions
from payops.tasks.reports.run_reports import ensure_reports_spare_source
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.wire.references import LABEL_MAX
from prefect import get_run_logger
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

REPORT_DIR_DESCRIPTION = (
    "Folder or storage URL (s3://..., gs://...) for the reports. Leave empty for the payops reports folder "
    "(PAYOPS_REPORT_URL, else the reports folder in the payops home)."
)


def _none_is_empty(value: Any) -> Any:
    return "" if value is None else value


Text = Annotated[str, BeforeValidator(_none_is_empty)]
"""Text where empty means "not given" (None from older callers too): one plain string input in the form."""

_TITLE_SUFFIXES = (("_ttl_s", " lifetime (seconds)"), ("_per_s", " per second"), ("_s", " (seconds)"))


def operator_title(name: str, _info: Any = None) -> str:
    """A field's label in the run form: ``poll_deadline_s`` → "Poll deadline (seconds)", ``report_dir`` →
    "Report folder" (pydantic's default would show "Poll Deadline S")."""
    words = name.rstrip("_")
    for suffix, text in _TITLE_SUFFIXES:
        if words.endswith(suffix):
            words = words[: -len(suffix)] + text
            break
    words = words.replace("_dir", "_folder").replace("_", " ")
    return words[:1].upper() + words[1:]


FORM_CONFIG = ConfigDict(field_title_generator=operator_title)
"""Model config of every run's parameters: operator titles for the form's fields."""

CREDENTIALS_DESCRIPTION = (
    "Name of the saved Payments credentials block to pay with. Leave empty to use the worker's PAYOPS_* "
    "environment settings."
)


# The fields every run's form shares (one description each): where reports go, which credentials, how fast.
ReportDir = Annotated[Text, Field(description=REPORT_DIR_DESCRIPTION)]
CredentialsBlock = Annotated[Text, Field(description=CREDENTIALS_DESCRIPTION)]
DEFAULT_RATE_PER_S = 1000.0
"""The request rate's ceiling for the runs that read or send in bulk (a payout run, a reconciliation, a
transactions report): the adaptive rate starts well below it and backs off at the service's first 429."""
RateLimit = Annotated[
    float,
    Field(
        gt=0, description="Most requests per second to the Payments Service (without a Prefect rate limit)."
    ),
]


class SheetRunParams(BaseModel):
    """A sheet, the run's label, where reports go and how to reach the service."""

    model_config = FORM_CONFIG

    source: str = Field(
        min_length=1,
        description="The sheet to process: a path on the worker or a storage URL (.xlsx, .xlsm or .csv).",
    )
    label: Text = Field(
        "",
        max_length=LABEL_MAX,
        description=(
            "Name of this run, used for payment references, report files, the run's name and tags. Leave "
            "empty to derive it from the sheet's content: running the same sheet again never pays twice."
        ),
    )
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: float = Field(
        DEFAULT_RATE_PER_S,
        gt=0,
        description=(
            "Most requests per second to the Payments Service when no `payments-api` rate limit is set up in "
            "Prefect; below it the rate slows down whenever the service answers 'too many requests'."
        ),
    )
    default_country_code: str = Field(
        "233",
        pattern=r"^\d{1,3}$",
        description="Country calling code added to phone numbers written without one (233: Ghana).",
    )


def name_from_parameters(parameters: dict[str, Any]) -> str:
    """A sheet run's name: its label, else the sheet's file name without extension."""
    params = parameters.get("params")
    fields = (
        params.model_dump() if isinstance(params, BaseModel) else params if isinstance(params, dict) else {}
    )
    if fields.get("label"):
        return str(fields["label"])
    stem = PurePosixPath(str(fields.get("source") or "").replace("\\", "/")).stem
    return stem or "sheet"


GENERATED_NAME = re.compile(r"[^\W\d_]+-[^\W\d_]+")
"""The shape of the names Prefect makes up for runs nobody named: two random words of letters
(``educational-limpet`` from the server, ``Sleek-Baya`` pre-filled by the UI's run form, whose animals are not
all ASCII: ``Fantastic-Vicuña``)."""


def sheet_run_name() -> str:
    """``flow_run_name`` of the sheet flows, called by Prefect when a run starts: the name it was created
    with when a person typed one (Prefect's run form, the console), else `name_from_parameters`. Prefect
    would otherwise replace a typed name silently; a typed name of just two words joined by a dash is taken
    for one of Prefect's own."""
    from prefect.runtime import flow_run

    given = flow_run.name or ""
    if given and not GENERATED_NAME.fullmatch(given):
        return given
    return name_from_parameters(flow_run.parameters)


PAYOUT_TAG = "payroll"
"""Tag of every payout run (the flow adds it, however the run was started): the operator's filter."""
FAILURES_TAG = "payout-failures"
"""Tag of a payout run that ended "Completed with failures": payouts failed, were refunded or refused. Its
badge stays green (a Completed state: Failed or Crashed would retry the run or run crash handling), so the
tag is what a person filters on (docs/operations.md, *Prefect UI*)."""
MAINTENANCE_TAG = "maintenance"
"""Tag of the deployments that run by themselves and move no money (events catch-up, wallet watch, payout
follow-up, a run's reconciliation on a payout's change): deployments/prefect.yaml; filtered out of an
operator's view."""


async def tag_run(label: str, *more: str) -> None:
    """Add the run's label (and ``more`` tags) to its tags, so Prefect's runs list filters by it."""
    await add_run_tags(label, *more)


async def add_run_tags(*tags: str) -> None:
    """Add ``tags`` to this flow run's tags in Prefect (a failure is logged, never fatal: the payments
    matter more than a tag). The run's current tags are read first: an earlier call changed them since the
    run started."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    wanted = [t for t in dict.fromkeys(tags) if t]
    if not wanted or not flow_run.id:
        return
    try:
        async with get_client() as client:
            current = list((await client.read_flow_run(flow_run.id)).tags or [])
            missing = [t for t in wanted if t not in current]
            if missing:
                await client.update_flow_run(flow_run.id, tags=[*current, *missing])
    except Exception as exc:  # noqa: BLE001 - tags are a convenience; say so and go on
        get_run_logger().warning("run not tagged %s (%s)", ", ".join(wanted), type(exc).__name__)


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
