"""`flow`: the decorator of every payops flow, Prefect's own with the parameters serialised by pydantic.

Prefect stores the parameters of a run started in-process (a command, a test) with the run, serialised by
FastAPI's ``jsonable_encoder``. In a payops flow process that is FastAPI's only use, and importing it is a
cost every command paid (docs/performance.md, *A run's fixed cost*). payops' flow parameters are pydantic
models and plain values, which ``pydantic_core.to_jsonable_python`` serialises to the same JSON, except that a
Decimal stays a decimal string (money is never a float). Runs a deployment starts take their parameters from
the API and never come here.

Importing it also sends payops' own loggers (``logging.getLogger(__name__)`` in the tasks: "global
concurrency limit inactive", "lookup cache unavailable") to the log of the run they happen in, in Prefect's
UI, beside stderr (`send_payops_logs_to_runs`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prefect import Flow
from prefect.context import FlowRunContext, TaskRunContext
from prefect.futures import PrefectFuture
from prefect.logging.handlers import APILogHandler
from prefect.states import State
from pydantic_core import to_jsonable_python

P = ParamSpec("P")
R = TypeVar("R")


class RunLogHandler(APILogHandler):
    """Prefect's API log handler for payops' loggers, taking only records made inside a flow or task run:
    what Prefect's ``PREFECT_LOGGING_EXTRA_LOGGERS=payops`` would do, without its warning for each record
    logged outside a run (a CLI command, the console), and without a setting every host must carry."""

    def filter(self, record: logging.LogRecord) -> bool:
        in_run = FlowRunContext.get() is not None or TaskRunContext.get() is not None
        return in_run and super().filter(record)


def send_payops_logs_to_runs() -> None:
    """Attach `RunLogHandler` to the ``payops`` logger once per process (its modules' loggers are its
    children: their warnings reach the run's log; they still reach stderr through the root logger)."""
    payops = logging.getLogger("payops")
    if not any(isinstance(h, RunLogHandler) for h in payops.handlers):
        payops.addHandler(RunLogHandler())


send_payops_logs_to_runs()


def _placeholder(value: Any) -> str:
    """What Prefect stores for a value it cannot serialise: its type's name."""
    return f"<{type(value).__name__}>"


class PayopsFlow(Flow[P, R]):
    """A Prefect flow whose parameters are serialised without FastAPI."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """Each parameter as JSON-ready values; a future, a state or a value nothing can serialise is stored
        as ``<TypeName>``, as Prefect stores it."""
        serialized: dict[str, Any] = {}
        for key, value in parameters.items():
            if isinstance(value, PrefectFuture | State):
                serialized[key] = _placeholder(value)
                continue
            try:
                serialized[key] = to_jsonable_python(value, fallback=_placeholder)
            except (TypeError, ValueError, RecursionError):
                serialized[key] = _placeholder(value)
        return serialized

    def with_options(self, **options: Any) -> PayopsFlow[P, R]:  # type: ignore[override]
        """Prefect's copy with new options, kept a `PayopsFlow` (Prefect's builds a plain `Flow`)."""
        copy = super().with_options(**options)
        copy.__class__ = PayopsFlow
        return copy  # type: ignore[return-value]


def flow(**options: Any) -> Callable[[Callable[P, R]], PayopsFlow[P, R]]:
    """``@flow(name=..., ...)``: `prefect.flow`'s options, making a `PayopsFlow`."""

    def decorate(fn: Callable[P, R]) -> PayopsFlow[P, R]:
        return PayopsFlow(fn=fn, **options)

    return decorate
