"""Flow `events-catch-up`: emit the Payments Service events the webhooks missed, each once.

Reads ``GET /v1/events`` from the cursor kept in a Prefect Variable, emits ``payments.<type>`` Prefect events
(the conversion shared with the webhook receiver: `tasks.events.payment_events`), advances the cursor only
after processing, and restarts from the first event when the service no longer knows the cursor (90-day 400).
See `tasks.events.events_sync` for the exactly-once argument.
"""

from __future__ import annotations

from typing import Any

from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run
from payops.flows.run_params import FORM_CONFIG, CredentialsBlock, RateLimit, Text
from payops.flows.summaries import EventsCatchUpSummary
from payops.store.settings import PayopsSettings
from payops.tasks.events.alerts import events_catch_up_hook
from payops.tasks.events.events_sync import (
    DEFAULT_CURSOR_VARIABLE,
    PAGE_SIZE,
    SEEN_CAPACITY,
    VARIABLE_NAME_PATTERN,
    sync_events_task,
)
from payops.tasks.events.payment_events import ForwardFilter
from payops.tasks.reports.artifacts import markdown_table
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.states import State
from pydantic import BaseModel, Field, field_validator


class EventsCatchUpParams(BaseModel):
    """Parameters of `events-catch-up`."""

    model_config = FORM_CONFIG

    variable: str = Field(
        DEFAULT_CURSOR_VARIABLE,
        pattern=VARIABLE_NAME_PATTERN,
        description="Name of the Prefect Variable that remembers the last event read (its '-seen' twin keeps "
        "recent event ids).",
    )
    page_size: int = Field(
        PAGE_SIZE, ge=1, le=SEEN_CAPACITY, description="Events read per request to the service."
    )
    emitter: Text = Field(
        "",
        description="Custom receiver of the events (module:function). Leave empty to send them to Prefect.",
    )
    forward: str = Field(
        "*",
        description="Events to emit: comma-separated '<type pattern>[:<status>|...]' rules (as "
        "PAYOPS_WEBHOOK_FORWARD); '*' emits all.",
    )
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = 50

    @field_validator("forward")
    @classmethod
    def _forward_rules(cls, value: str) -> str:
        ForwardFilter(value)  # raises ValueError naming the bad rule
        return value


def _markdown(summary: dict[str, Any]) -> str:
    """The catch-up's artifact, from the summary's JSON."""
    lines = ["# Events catch-up", "", f"**Outcome:** {summary['outcome']}", ""]
    keys = ["events_read", "events_emitted", "duplicates_skipped", "restarted_without_cursor"]
    lines.append(markdown_table(keys, [[summary[k] for k in keys]]))
    lines += [
        "",
        f"Cursor `{summary['variable']}`: `{summary['cursor_before']}` → `{summary['cursor_after']}`",
    ]
    if summary["emitted_by_type"]:
        lines += ["", markdown_table(["event type", "emitted"], summary["emitted_by_type"].items())]
    return "\n".join(lines)


@flow(name="events-catch-up", log_prints=False, on_completion=[events_catch_up_hook])
async def events_catch_up(params: EventsCatchUpParams = EventsCatchUpParams()) -> State:
    """Emit every event after the saved cursor once, then save the cursor.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `EventsCatchUpSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary = await _events_catch_up(params, payops)
    return end_run(summary)


async def _events_catch_up(params: EventsCatchUpParams, payops: PayopsSettings) -> EventsCatchUpSummary:
    logger = get_run_logger()
    meter = RunMeter()
    settings = load_settings(params.credentials_block, payops)
    result = await sync_events_task(
        settings,
        payops,
        params.variable,
        params.page_size,
        params.rate_limit_per_s,
        params.emitter,
        params.forward,
    )
    oldest = result.oldest_emitted_at
    summary = EventsCatchUpSummary(
        outcome=Outcome.COMPLETED,
        variable=params.variable,
        cursor_before=result.cursor_before,
        cursor_after=result.cursor_after,
        events_read=result.read,
        events_emitted=result.emitted,
        events_kept_not_forwarded=result.kept_not_forwarded,
        duplicates_skipped=result.duplicates_skipped,
        pages=result.pages,
        restarted_without_cursor=result.restarted_without_cursor,
        oldest_emitted_at=oldest.isoformat() if oldest else None,
        emitted_by_type=dict(sorted(result.by_type.items())),
        api_calls=dict(sorted(result.api_calls.items())),
        duration_s=meter.elapsed,
    )
    if result.restarted_without_cursor:
        logger.warning(
            "cursor %s no longer known to the service: restarted from the first event", result.cursor_before
        )
    await acreate_markdown_artifact(
        key="events-catch-up-summary", markdown=_markdown(summary.as_json()), description="Events catch-up"
    )
    logger.info(
        "events catch-up: %d read, %d emitted, %d duplicates skipped; cursor %s",
        result.read,
        result.emitted,
        result.duplicates_skipped,
        result.cursor_after,
    )
    return summary
