"""Every Prefect task that calls the Payments Service takes the one retry policy (`tasks.runtime.retries`,
``API_TASK_RETRY``); a task that does not call it is never retried."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import payops.tasks
from payops.tasks.runtime.retries import API_TASK_RETRY, is_transient
from prefect import Task


def all_tasks() -> dict[str, Task]:
    found: dict[str, Task] = {}
    for info in pkgutil.walk_packages(payops.tasks.__path__, "payops.tasks."):
        if info.name.endswith("parser_child"):  # the parser child's entry point: no tasks, exits when run
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Task) and value.fn.__module__ == module.__name__:
                found[value.name] = value
    return found


def calls_the_service(task: Task) -> bool:
    """A task whose function takes the client's settings opens a Payments client."""
    parameters = inspect.signature(task.fn).parameters.values()
    return any("PaymentsSettings" in str(p.annotation) for p in parameters)


def test_every_api_task_takes_the_one_retry_policy() -> None:
    tasks = all_tasks()
    api = {name: t for name, t in tasks.items() if calls_the_service(t)}
    assert {"submit-batch", "poll-payouts", "preflight", "daily-close", "reconcile-run"} <= set(api)
    for name, task in api.items():
        policy = (task.retries, task.retry_delay_seconds, task.retry_condition_fn)
        expected = (API_TASK_RETRY["retries"], API_TASK_RETRY["retry_delay_seconds"], is_transient)
        assert policy == expected, f"{name}: {policy}"


def test_a_task_that_does_not_call_the_service_is_not_retried() -> None:
    others = {name: t for name, t in all_tasks().items() if not calls_the_service(t)}
    assert "read-sheet" in others
    assert {name: t.retries for name, t in others.items() if t.retries} == {}
