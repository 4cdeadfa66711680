"""Submitting one payout batch: a plain function and its thin Prefect task."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from payops.connectors.payments import ConflictError, PaymentsClient, PaymentsSettings
from payops.tasks.payouts.batching import PayoutBatch
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.ratelimit import LimiterStats
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE


class BatchRefused(RuntimeError):
    """The service refused a whole batch: a bug in what we built or a label reused for other content."""


@dataclass(slots=True)
class ItemResult:
    """What the service answered for one item of a batch."""

    reference: str
    row: int
    accepted: bool
    status: str | None = None
    fee: str | None = None
    created_at: str | None = None
    code: str | None = None
    message: str | None = None


@dataclass
class BatchResult:
    index: int
    reference: str
    items: list[ItemResult]
    api_calls: Counter[str] = field(default_factory=Counter)
    limiter: LimiterStats | None = None


async def submit_batch(client: PaymentsClient, batch: PayoutBatch) -> BatchResult:
    """Send one batch with its fixed Idempotency-Key; a replay returns the first answer."""
    from payops.connectors.payments.models import PayoutRequest

    try:
        answer = await client.payout_batches.create(
            reference=batch.reference,
            items=[PayoutRequest.model_validate(i) for i in batch.items],
            idempotency_key=batch.idempotency_key,
        )
    except ConflictError as exc:
        if exc.code == "duplicate_reference":
            raise BatchRefused(
                f"batch reference {batch.reference} was used for a different batch: this label was "
                "used before for other content. Use a new label to pay this sheet."
            ) from exc
        raise
    by_ref = {i["reference"]: row for i, row in zip(batch.items, batch.rows, strict=True)}
    items: list[ItemResult] = []
    for item in answer.items:
        row = by_ref[item.reference]
        if item.payout is not None:
            p = item.payout
            items.append(
                ItemResult(
                    item.reference,
                    row,
                    True,
                    status=p.status,
                    fee=None if p.fee is None else str(p.fee),
                    created_at=p.created_at.isoformat() if p.created_at else None,
                )
            )
        else:
            err = item.error
            items.append(
                ItemResult(
                    item.reference,
                    row,
                    False,
                    code=err.code if err else str(item.status),
                    message=err.message if err else None,
                )
            )
    return BatchResult(batch.index, batch.reference, items)


@task(
    cache_policy=NO_CACHE,
    name="submit-batch",
    task_run_name="submit-batch-{batch.index}",
    **API_TASK_RETRY,
)
async def submit_batch_task(settings: PaymentsSettings, batch: PayoutBatch, rate_per_s: float) -> BatchResult:
    """Prefect task: one per batch, retried only by the one policy (`tasks.runtime.retries`): a refused batch
    never, a batch the client already sent ``max_retries + 1`` times never; a retry resends the same key and
    body, so it replays."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        result = await submit_batch(client, batch)
        result.api_calls = Counter(client.api_calls)
        result.limiter = transport.stats
        return result
