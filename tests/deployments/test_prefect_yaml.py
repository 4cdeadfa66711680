"""deployments/prefect.yaml: every entrypoint is a flow, every parameter set fits its flow, no inline secrets,
and the settlement trigger really fires on the event the webhook receiver emits."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from payops.connectors.payments.models import WebhookEnvelope
from payops.deployments.console.webhooks import default_emitter, prefect_event
from payops.deployments.serve import (
    ROOT,
    load_specs,
    resolve_templates,
    runner_deployments,
    schedules_of,
    triggers_of,
)
from prefect.events.schemas.events import Resource
from prefect.exceptions import ParameterTypeError
from prefect.flows import Flow, load_flow_from_entrypoint

SPECS = {spec["name"]: spec for spec in load_specs()}
CREDENTIALS = "{{ prefect.variables.payops_credentials_block }}"
SECRET_WORDS = ("secret", "password", "token", "client_id")
OPERATOR_FILLS = {
    "payout-spreadsheet": {"source": "/srv/payroll/2026-11.xlsx"},
    "reconcile-run": {"label": "payroll-2026-11"},
}
PREFECT_ONLY = {"approval-deadlines"}  # reads Prefect's API only: no parameters, no service credential
DEVELOPER_PHRASES = ("prefect ui", "rendered as a form", "fsspec", "tasks/", ".py", "do not edit", "env vars")


def test_the_expected_deployments_are_declared() -> None:
    assert set(SPECS) == {
        "payout-spreadsheet",
        "approval-deadlines",
        "retry-failed-settlements",
        "settle-now",
        "events-catch-up",
        "daily-transactions-report",
        "wallet-watch",
        "payout-followup",
        "reconcile-day",
        "reconcile-run",
    }


@pytest.mark.parametrize("name", sorted(SPECS))
def test_entrypoint_is_a_flow_and_parameters_validate(name: str) -> None:
    spec = SPECS[name]
    # a module of the installed package, not a file of a checkout: workers run the wheel (issue 43)
    assert re.fullmatch(r"payops\.flows\.\w+:\w+", spec["entrypoint"]), spec["entrypoint"]
    flow = load_flow_from_entrypoint(spec["entrypoint"], use_placeholder_flow=False)
    assert isinstance(flow, Flow)
    filled = OPERATOR_FILLS.get(name)
    if filled:  # a field the operator fills in the run form: no fake default in prefect.yaml
        with pytest.raises(ParameterTypeError, match=next(iter(filled))):
            flow.validate_parameters(spec["parameters"])
    if name in PREFECT_ONLY:
        assert not spec.get("parameters") and not flow.parameters.properties
    else:
        flow.validate_parameters({"params": {**spec["parameters"]["params"], **(filled or {})}})
    for trigger in spec.get("triggers") or []:
        # The automation's parameters replace the deployment's top-level ones (shallow merge).
        flow.validate_parameters({**spec["parameters"], **trigger["parameters"]})
    schedules_of(spec)
    triggers_of(spec)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_credentials_come_from_a_block_variable_never_inline(name: str) -> None:
    spec = SPECS[name]

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                assert not any(w in key.lower() for w in SECRET_WORDS), (
                    f"{name}: inline credential at {path}.{key}"
                )
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(spec, name)
    if name not in PREFECT_ONLY:
        assert spec["parameters"]["params"]["credentials_block"] == CREDENTIALS
    for trigger in spec.get("triggers") or []:
        assert trigger["parameters"]["params"]["credentials_block"] == CREDENTIALS
    assert spec["work_pool"]["name"] == "payops"
    # The worker's block too: a run whose `params` were replaced whole (only source and label) still pays.
    assert spec["work_pool"]["job_variables"]["env"]["PAYOPS_CREDENTIALS_BLOCK"] == CREDENTIALS


def test_schedules() -> None:
    assert SPECS["retry-failed-settlements"]["schedules"] == [{"cron": "5 * * * *", "timezone": "UTC"}]
    assert SPECS["events-catch-up"]["schedules"][0]["interval"] <= 600
    assert SPECS["daily-transactions-report"]["schedules"][0]["cron"].endswith("* * *")
    assert SPECS["wallet-watch"]["schedules"][0]["interval"] <= 3600
    assert SPECS["payout-spreadsheet"]["schedules"] == [] and SPECS["settle-now"]["schedules"] == []
    assert SPECS["reconcile-day"]["schedules"] == [{"cron": "10 0 * * *", "timezone": "Africa/Accra"}]


MAINTENANCE = {"approval-deadlines", "events-catch-up", "wallet-watch", "payout-followup", "reconcile-run"}
"""The deployments that start by themselves and move no money: an operator's view filters them out."""


def test_maintenance_runs_and_payout_runs_carry_the_tags_an_operator_filters_on() -> None:
    from payops.deployments.serve import runner_deployments
    from payops.flows.run_params import MAINTENANCE_TAG, PAYOUT_TAG

    tagged = {name for name, spec in SPECS.items() if MAINTENANCE_TAG in spec["tags"]}
    assert tagged == MAINTENANCE
    for name in MAINTENANCE - {"payout-followup", "reconcile-run"}:  # the 1-, 5- and 15-minute schedules
        assert SPECS[name]["schedules"][0]["interval"] <= 900, name
    assert PAYOUT_TAG in SPECS["payout-spreadsheet"]["tags"]
    assert [n for n, spec in SPECS.items() if PAYOUT_TAG in spec["tags"]] == ["payout-spreadsheet"]
    # `payops serve` builds its deployments from this file with the same tags
    served = {d.name: set(d.tags) for d in runner_deployments(list(SPECS.values()))}
    assert {n for n, tags in served.items() if MAINTENANCE_TAG in tags} == MAINTENANCE
    assert PAYOUT_TAG in served["payout-spreadsheet"]


def test_every_schedule_names_its_timezone() -> None:
    for name, spec in SPECS.items():
        for item in spec.get("schedules") or []:
            assert item.get("timezone") in {"UTC", "Africa/Accra"}, (name, item)
        for schedule in schedules_of(spec):
            assert schedule.timezone == next(i["timezone"] for i in spec["schedules"]), name


def _params_schema(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run form of a deployment: Prefect's parameter schema of its flow, and the params model's part."""
    from prefect.utilities.callables import parameter_schema

    flow = load_flow_from_entrypoint(SPECS[name]["entrypoint"], use_placeholder_flow=False)
    schema = parameter_schema(flow.fn).model_dump()
    params = schema["properties"]["params"]
    assert "anyOf" not in params, f"{name}: the params form must not be a toggle with null"
    model = schema["definitions"][params["$ref"].rsplit("/", 1)[1]]
    return schema, model


@pytest.mark.parametrize("name", sorted(set(SPECS) - PREFECT_ONLY))
def test_run_forms_describe_every_field_for_an_operator(name: str) -> None:
    schema, model = _params_schema(name)
    if name not in OPERATOR_FILLS:
        assert "params" not in schema.get("required", []), f"{name}: params need a default"
    for field, prop in model["properties"].items():
        text = (prop.get("description") or "").strip()
        assert text, f"{name}: {field} has no description"
        lowered = text.lower()
        assert not [p for p in DEVELOPER_PHRASES if p in lowered], f"{name}: {field}: {text!r}"
        assert not re.search(r" (S|Dir)$", prop["title"]), f"{name}: {field}: title {prop['title']!r}"
    assert not [p for p in DEVELOPER_PHRASES if p in (model.get("description") or "").lower()]


def test_payout_form_fields_are_plain_strings_without_fake_defaults() -> None:
    _schema, model = _params_schema("payout-spreadsheet")
    props = model["properties"]
    for field in ("label", "approval_threshold", "report_dir", "credentials_block", "start"):
        assert props[field]["type"] == "string" and "anyOf" not in props[field], field
        assert props[field]["default"] == "", field
    assert "default" not in props["source"] and "source" in model["required"]
    assert props["approval_threshold"]["pattern"] == r"^(\d+(\.\d{1,2})?)?$"
    assert "REPLACE-ME" not in (ROOT / "deployments" / "prefect.yaml").read_text()


def _settlement_event(outcome: str, reference: str = "SET-1") -> dict[str, Any]:
    envelope = WebhookEnvelope.model_validate(
        {
            "id": f"evt-{reference}-{outcome}",
            "type": "settlement.status_changed",
            "data": {"reference": reference, "status": "completed", "outcome": outcome},
        }
    )
    return prefect_event(envelope)


def test_settlement_trigger_matches_failed_outcomes_of_receiver_events() -> None:
    (trigger,) = triggers_of(SPECS["retry-failed-settlements"])
    template = SPECS["retry-failed-settlements"]["triggers"][0]["parameters"]["params"]["run_reference"]
    assert "| string" in template
    for outcome, expected in [("failed_partial", True), ("failed_all", True), ("settled", False)]:
        event = _settlement_event(outcome)
        assert event["event"] in trigger.expect
        assert trigger.match.matches(Resource.model_validate(event["resource"])) is expected


def test_reconcile_trigger_matches_payouts_refunded_or_failed_after_the_run() -> None:
    """The webhook receiver and the events catch-up emit the same event (`tasks.events.payment_events`)."""
    (trigger,) = triggers_of(SPECS["reconcile-run"])
    template = SPECS["reconcile-run"]["triggers"][0]["parameters"]["params"]["reference"]
    assert template == "{{ event.payload.reference | string }}"
    for status, expected in [("refunded", True), ("failed", True), ("delivered", False), ("accepted", False)]:
        data = {"reference": "P-1", "status": status}
        body = {"id": f"e-{status}", "type": "payout.status_changed", "data": data}
        envelope = WebhookEnvelope.model_validate(body)
        event = prefect_event(envelope)
        assert event["event"] in trigger.expect
        assert trigger.match.matches(Resource.model_validate(event["resource"])) is expected
        assert event["payload"]["reference"] == "P-1"


async def remove_deployment(deployment_id: Any) -> None:
    """A deployment made on the session's server, with its runs and its automations, gone."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    async with get_client() as client:
        made = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        for run in await client.read_flow_runs(deployment_filter=made):
            await client.delete_flow_run(run.id)
        await client.delete_resource_owned_automations(f"prefect.deployment.{deployment_id}")
        await client.delete_deployment(deployment_id)


@pytest.mark.e2e
def test_receiver_event_starts_the_retry_deployment_with_the_reference(prefect_harness) -> None:
    """On Prefect's test server: the automation renders `{{ event.payload.reference | string }}`."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    (spec,) = asyncio.run(resolve_templates([SPECS["retry-failed-settlements"]]))  # as `prefect deploy` does
    assert spec["parameters"]["params"]["credentials_block"] == ""  # variable unset: the worker's env vars
    flow = load_flow_from_entrypoint(spec["entrypoint"], use_placeholder_flow=False)
    deployment = flow.to_deployment(
        name="trigger-check",
        parameters=spec["parameters"],
        triggers=triggers_of({**spec, "name": "trigger-check"}),
    )
    deployment_id = deployment.apply()
    try:
        time.sleep(3)  # the triggers service picks up the new automation
        default_emitter(**_settlement_event("settled", "SET-OK"))
        default_emitter(**_settlement_event("failed_partial", "SET-42"))

        async def runs() -> list[Any]:
            async with get_client() as client:
                return await client.read_flow_runs(
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
                )

        deadline = time.monotonic() + 60
        found: list[Any] = []
        while time.monotonic() < deadline and not found:
            time.sleep(1)
            found = asyncio.run(runs())
    finally:  # its automation would start more runs on every later file's settlement events
        asyncio.run(remove_deployment(deployment_id))
    assert len(found) == 1, "the automation did not start the retry deployment"
    params = found[0].parameters["params"]
    assert params["run_reference"] == "SET-42"
    assert params["since_days"] == 7


def test_the_followup_trigger_matches_the_final_payout_statuses() -> None:
    from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES

    (trigger,) = SPECS["payout-followup"]["triggers"]
    assert set(trigger["match"]["payments.status"]) == PAYOUT_FINAL_STATUSES
    assert trigger["within"] >= 60  # debounced: a storm of payout events is one follow-up run a minute


CATCH_UPS_AND_WATCHES = {"events-catch-up", "wallet-watch", "approval-deadlines"}


def test_scheduled_deployments_run_one_at_a_time() -> None:
    """Every scheduled deployment has a concurrency limit of 1 (issue 43); a catch-up or a watch that finds
    the last one running is cancelled, anything else waits for it."""
    scheduled = {name for name, spec in SPECS.items() if spec.get("schedules")}
    assert scheduled >= CATCH_UPS_AND_WATCHES | {"retry-failed-settlements", "reconcile-day"}
    for name in scheduled:
        limit = SPECS[name]["concurrency_limit"]
        strategy = "CANCEL_NEW" if name in CATCH_UPS_AND_WATCHES else "ENQUEUE"
        assert limit == {"limit": 1, "collision_strategy": strategy}, name


@pytest.mark.e2e
def test_a_catch_up_started_while_one_runs_is_cancelled(prefect_harness) -> None:
    """The limit as payops serve deploys it (the same file), on Prefect's server: a second events catch-up
    proposed while the first runs ends Cancelled; a second daily close waits (AwaitingConcurrencySlot)."""
    from prefect.client.orchestration import get_client
    from prefect.states import Pending, Running

    specs = asyncio.run(resolve_templates([SPECS["events-catch-up"], SPECS["reconcile-day"]]))
    catch_up, close = runner_deployments([{**s, "name": f"{s['name']}-limit-check"} for s in specs])

    async def second_of_two(deployment: Any) -> Any:
        deployment.schedules = []  # only the runs made here
        deployment_id = await deployment.apply()
        try:
            async with get_client() as client:
                first = await client.create_flow_run_from_deployment(deployment_id)
                second = await client.create_flow_run_from_deployment(deployment_id)
                assert (await client.set_flow_run_state(first.id, Pending())).state.is_pending()
                await client.set_flow_run_state(first.id, Running())
                await client.set_flow_run_state(second.id, Pending())
                return (await client.read_flow_run(second.id)).state
        finally:  # a run left running or waiting for its slot would be a later file's upcoming run
            await remove_deployment(deployment_id)

    cancelled = asyncio.run(second_of_two(catch_up))
    assert cancelled.is_cancelled(), cancelled
    waiting = asyncio.run(second_of_two(close))
    assert waiting.is_scheduled() and waiting.name == "AwaitingConcurrencySlot", waiting


def test_runs_beat_often_enough_for_the_recovery_automation_to_find_a_dead_one() -> None:
    """Workers' flow processes (the pool's job variables) and serve's beat every HEARTBEAT_S; the automation
    that marks a silent payout run Crashed waits three beats and a margin (issue 43)."""
    from payops.deployments.alerts import load_recovery_automations
    from payops.deployments.serve import HEARTBEAT_S

    for spec in SPECS.values():
        assert spec["work_pool"]["job_variables"]["env"]["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == HEARTBEAT_S
    gone = next(a for a in load_recovery_automations() if "process is gone" in a.name)
    assert gone.trigger.within.total_seconds() >= 3 * int(HEARTBEAT_S)
    assert [a.state.value for a in gone.actions] == ["CRASHED"]
    # a run suspended for approval ends its process on purpose: not gone (test_scaleout_approvals.py)
    assert "prefect.flow-run.Suspended" in gone.trigger.expect


def test_automations_that_wait_for_a_runs_end_know_every_end_payops_names() -> None:
    """Prefect names a state's event after the state ("prefect.flow-run.Not approved"): an automation waiting
    for a run's end that knew only Prefect's own names took a rejected or a partly failed payout run for a
    silent one (the server then logged a failed action 100 s after each), and could force a run that ended
    "Completed with failures" while it was asked to cancel to Cancelled."""
    from payops.deployments.alerts import load_recovery_automations
    from payops.flows.outcomes import FINAL_STATE_NAMES

    ends = {f"prefect.flow-run.{name}" for name in FINAL_STATE_NAMES}
    waiting = [a for a in load_recovery_automations() if a.trigger.posture == "Proactive"]
    names = {
        "payops: payout run whose process is gone",
        "payops: run stuck cancelling",
        "payops: run stuck starting",
    }
    assert {a.name for a in waiting} == names
    for automation in waiting:
        missing = ends - set(automation.trigger.expect)
        assert not missing, (automation.name, missing)


def test_workers_suspend_approval_waits_and_serve_leaves_their_sweep_out() -> None:
    """The pool's runs suspend while they wait for approval; the approval-deadlines sweep that resumes them
    for reminders and deadlines is a workers' deployment: `payops serve`'s runs pause in their process."""
    from payops.deployments.serve import WORKERS_ONLY, served_specs

    for spec in SPECS.values():
        assert spec["work_pool"]["job_variables"]["env"]["PAYOPS_APPROVAL_WAIT"] == "suspend"
    served = {s["name"] for s in served_specs(list(SPECS.values()))}
    assert served == set(SPECS) - {"approval-deadlines"} and WORKERS_ONLY == {"approval-deadlines"}
    assert SPECS["approval-deadlines"]["schedules"] == [{"interval": 60, "timezone": "UTC"}]
