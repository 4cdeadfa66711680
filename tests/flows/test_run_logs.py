"""payops' own loggers reach the run's log in Prefect (issue 43): a warning a task logs with
``logging.getLogger(__name__)`` (as payops' task modules do) is read back through Prefect's API, while the
same logger outside a run writes to stderr only, without Prefect's "no flow run id" warning."""

from __future__ import annotations

import asyncio
import logging
import warnings
from uuid import UUID

from payops.flows.flow_decorator import flow
from prefect import task

LOGGER = "payops.tasks.runtime.ratelimit"  # a payops task module's logger, as it is named in a run


@task
def warn_in_a_task() -> None:
    logging.getLogger(LOGGER).warning("global concurrency limit 'payments-api' inactive (test)")


@flow(name="payops-log-check")
def logs_a_warning() -> None:
    warn_in_a_task()
    logging.getLogger("payops.flows.payouts").warning("a flow module's warning (test)")


async def _messages(flow_run_id: UUID) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with get_client() as client:
        for _ in range(40):
            logs = await client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            said = [log.message for log in logs]
            if len([m for m in said if "(test)" in m]) >= 2:
                return said
            await asyncio.sleep(0.25)
    return said


def test_a_warning_logged_in_a_task_reaches_the_runs_log(prefect_harness: None) -> None:
    state = logs_a_warning(return_state=True)
    said = asyncio.run(_messages(state.state_details.flow_run_id))
    assert "global concurrency limit 'payments-api' inactive (test)" in said
    assert "a flow module's warning (test)" in said


def test_outside_a_run_payops_logs_raise_no_prefect_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Prefect's handler warns "...without a flow run id"
        logging.getLogger(LOGGER).warning("outside any run (test)")
