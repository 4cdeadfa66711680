"""When a Prefect task that calls the Payments Service is retried."""

from __future__ import annotations

from typing import Any

from connectors.payments import APIConnectionError, InternalServerError, RateLimitError


async def is_transient(_task: Any, _run: Any, state: Any) -> bool:
    """``retry_condition_fn``: retry only when the service was unreachable or kept failing (the fixed
    references and Idempotency-Keys make a retry safe)."""
    error = await state.aresult(raise_on_failure=False)
    return isinstance(error, APIConnectionError | InternalServerError | RateLimitError)
