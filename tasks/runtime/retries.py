"""The one retry policy of every Prefect task that calls the Payments Service.

A request is retried in one place: the client (`connectors.payments._retry`: 429, 5xx, timeouts and
connection errors, with back-off, up to ``PaymentsSettings.max_retries``, the same Idempotency-Key on every
attempt). A task is retried on top of that only for a transient failure the client gave up on before spending
its budget (a ``Retry-After`` longer than it waits): so a batch POST goes out at most ``max_retries + 1``
times, a refused batch (`tasks.payouts.submission.BatchRefused`, a 4xx) once, and nothing else is retried at
all. A task that polls takes an absolute deadline, so its retry never restarts the wait.

Every API task takes ``**API_TASK_RETRY``; `tests/tasks/test_task_retries.py` holds the tasks to it.
"""

from __future__ import annotations

from typing import Any

from payops.connectors.payments import PaymentsError


async def is_transient(_task: Any, _run: Any, state: Any) -> bool:
    """``retry_condition_fn``: retry only when the service was unreachable or kept failing and the client did
    not already send the request as often as its budget allows (the fixed references and Idempotency-Keys
    make a retry safe)."""
    error = await state.aresult(raise_on_failure=False)
    return isinstance(error, PaymentsError) and error.transient and not error.retries_spent


API_TASK_RETRY: dict[str, Any] = {"retries": 2, "retry_delay_seconds": 2, "retry_condition_fn": is_transient}
"""The keywords of ``@task`` for every task calling the Payments Service (see the module docstring)."""
