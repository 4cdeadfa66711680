"""Property-based run of schemathesis, driven by the authored contract, against the emulator (faults off).

The document is ``connectors/payments/openapi.yaml`` (written from the spec), not the one the emulator
generates for itself. Every generated request (positive and negative) must get no 5xx, a documented status,
the documented content type and headers, and a body matching the response schema. A stateful run follows
the document's links (create → get). The generated document is still checked for models (drift against
the contract: test_sandbox_contract.py).
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from payops.connectors.payments.contract import openapi_document
from payops.sandbox import SandboxConfig, create_app
from payops.sandbox.auth import token_for
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.openapi_contract import operations

APP = create_app(SandboxConfig(token_ttl_s=3600, delivery_delay_s=0.5))
SANDBOX = APP.state.sandbox
TOKEN, _ = token_for(SANDBOX, SANDBOX.state.credentials["demo-test-client"])
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
CONTRACT = openapi_document()

schema = schemathesis.openapi.from_dict(openapi_document())
schema.app = APP


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_emulator_conforms_to_the_contract(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=HEADERS, checks=CHECKS)


class _Links(schema.as_state_machine()):  # type: ignore[misc]
    def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, object]:
        return {"headers": HEADERS}

    def validate_response(self, response, case, additional_checks=(), **kwargs) -> None:  # type: ignore[no-untyped-def]
        case.validate_response(response, checks=CHECKS)


TestContractLinks = _Links.TestCase
TestContractLinks.settings = settings(
    max_examples=15,
    stateful_step_count=4,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)


def test_openapi_documents_every_endpoint_with_models() -> None:
    doc = APP.openapi()
    expected = {
        ("post", "/auth/v1/oauth/token"),
        ("post", "/v1/payouts"),
        ("get", "/v1/payouts/{reference}"),
        ("post", "/v1/payout-batches"),
        ("get", "/v1/wallet"),
        ("get", "/v1/limits"),
        ("get", "/v1/fee-quotes/payouts"),
        ("get", "/v1/fee-quotes/collections"),
        ("get", "/v1/payment-methods"),
        ("get", "/v1/transactions"),
        ("get", "/v1/settlement-policy"),
        ("put", "/v1/settlement-policy"),
        ("delete", "/v1/settlement-policy"),
        ("post", "/v1/settlements"),
        ("get", "/v1/settlements"),
        ("get", "/v1/settlements/latest"),
        ("get", "/v1/settlements/{id}"),
        ("post", "/v1/settlements/{id}/resettlements"),
    }
    found = {(m, p) for p, item in doc["paths"].items() for m in item}
    assert expected <= found
    assert not any(p.startswith("/_sandbox") for p in doc["paths"])
    for method, path in expected:
        op = doc["paths"][path][method]
        success = [s for s in op["responses"] if s.startswith("2")]
        assert success, (method, path)
        if success != ["204"]:
            assert "$ref" in str(op["responses"][success[0]]["content"]), (method, path)
        assert op["responses"]["401" if path.startswith("/v1") else "400"]["content"]
        if method == "post" and path.startswith("/v1"):
            names = [p["name"] for p in op.get("parameters", []) if p["in"] == "header"]
            assert "Idempotency-Key" in names


def test_schemathesis_sent_a_few_hundred_requests_to_every_operation() -> None:
    """Runs after the generated tests (file order): they really exercised every operation of the contract."""
    sent = sum(n for name, n in SANDBOX.state.requests.items() if " /v1/" in name or " /auth/" in name)
    assert sent >= 250, SANDBOX.state.requests
    missing = [f"{m} {p}" for m, p, _ in operations(CONTRACT) if not SANDBOX.state.requests.get(f"{m} {p}")]
    assert not missing, missing
