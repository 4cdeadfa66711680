"""Every payops flow stores its run's parameters as Prefect would, without importing FastAPI to do it."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import payops.flows
from fastapi.encoders import jsonable_encoder
from payops.flows.flow_decorator import PayopsFlow
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from prefect import Flow
from prefect.states import Completed

ROOT = Path(__file__).resolve().parents[2]


def _params() -> PayoutRunParams:
    return PayoutRunParams(
        source="uploads/payroll november.xlsx",
        label="payroll-2026-11",
        report_dir="reports",
        approval_threshold=Decimal("2500.50"),
        column_map="Payment Reference=reference; Full Name=payee_name",
        poll_deadline_s=600.0,
    )


def test_every_flow_in_payops_is_a_payops_flow() -> None:
    flows: dict[str, Flow] = {}
    for info in pkgutil.iter_modules(payops.flows.__path__):
        module = importlib.import_module(f"payops.flows.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Flow) and value.fn.__module__ == module.__name__:
                flows[value.name] = value
    assert {"payout-spreadsheet", "reconcile-run", "retry-failed-settlements"} <= set(flows)
    assert {name for name, f in flows.items() if not isinstance(f, PayopsFlow)} == set()


def test_parameters_serialise_as_prefects_encoder_does() -> None:
    params = _params()
    stored = payout_spreadsheet.serialize_parameters({"params": params})
    assert stored == {"params": jsonable_encoder(params)}
    assert stored["params"]["approval_threshold"] == "2500.50"
    assert stored["params"]["column_map"] == "Payment Reference=reference; Full Name=payee_name"


def test_a_decimal_parameter_stays_a_decimal_string_not_a_float() -> None:
    assert jsonable_encoder(Decimal("10.10")) == 10.1  # what Prefect's encoder would store
    assert payout_spreadsheet.serialize_parameters({"amount": Decimal("10.10")}) == {"amount": "10.10"}


def test_what_cannot_be_serialised_is_stored_as_its_type_name() -> None:
    class Opaque:
        __slots__ = ()

    stored = payout_spreadsheet.serialize_parameters({"a": Opaque(), "b": Completed(), "c": [1, Opaque()]})
    assert stored == {"a": "<Opaque>", "b": "<State>", "c": [1, "<Opaque>"]}


def test_a_copy_with_other_options_is_still_a_payops_flow() -> None:
    copy = payout_spreadsheet.with_options(flow_run_name="payroll-2026-11")
    assert isinstance(copy, PayopsFlow)
    assert copy.flow_run_name == "payroll-2026-11" and copy.fn is payout_spreadsheet.fn


def test_a_payout_flow_process_serialises_its_parameters_without_importing_fastapi() -> None:
    probe = (
        "import sys\n"
        "from payops.flows.payouts import PayoutRunParams, payout_spreadsheet\n"
        "payout_spreadsheet.serialize_parameters({'params': PayoutRunParams(source='payroll.xlsx')})\n"
        "print('fastapi' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
