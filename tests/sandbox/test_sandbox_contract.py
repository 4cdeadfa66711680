"""The emulator against the authored contract: its generated document must not drift from it.

The mutation tests prove the checks can fail: a contract that loses a required field or changes a status
code, and an emulator route whose response shape changes, are each reported.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.responses import Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
from payops.connectors.payments.contract import openapi_document, openapi_text
from payops.connectors.payments.models import Transfer
from payops.sandbox import ManualClock, SandboxConfig, create_app
from payops.sandbox.auth import token_for
from payops.sandbox.routes import payouts
from payops.sandbox.routes import wallet as wallet_routes
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from tests.openapi_contract import compare, operations
from tests.sandbox.sandbox_support import START


def _generated() -> dict[str, Any]:
    return create_app(SandboxConfig()).openapi()


def test_contract_is_a_valid_openapi_31_document() -> None:
    doc = openapi_document()
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    broken = openapi_document()
    del broken["paths"]["/v1/payouts/{reference}"]["get"]["parameters"]  # {reference} no longer declared
    with pytest.raises(OpenAPIValidationError):
        validate(broken)


def test_generated_document_does_not_drift_from_the_contract() -> None:
    assert compare(openapi_document(), _generated()) == []


def test_drift_check_reports_a_dropped_required_field() -> None:
    contract = openapi_document()
    required = contract["components"]["schemas"]["SettlementRun"]["required"]
    required.remove("itemCount")
    problems = compare(contract, _generated())
    assert any("GET /v1/settlements/{id} 200" in p and "itemCount" in p for p in problems), problems


def test_drift_check_reports_a_dropped_required_request_field() -> None:
    contract = openapi_document()
    contract["components"]["schemas"]["PayoutRequest"]["required"].remove("destination")
    problems = compare(contract, _generated())
    assert any(p.startswith("POST /v1/payouts request") and "destination" in p for p in problems), problems


def test_drift_check_reports_a_changed_status_code() -> None:
    contract = openapi_document()
    responses = contract["paths"]["/v1/payouts"]["post"]["responses"]
    responses["201"] = responses.pop("202")
    problems = compare(contract, _generated())
    assert any(p.startswith("POST /v1/payouts: status codes differ") for p in problems), problems


def test_drift_check_reports_a_missing_operation_and_parameter() -> None:
    contract = openapi_document()
    del contract["paths"]["/v1/limits"]
    contract["paths"]["/v1/transactions"]["get"]["parameters"].pop()  # cursor
    problems = compare(contract, _generated())
    assert "GET /v1/limits: generated, not in the contract" in problems
    assert any(p.startswith("GET /v1/transactions: parameters differ") and "cursor" in p for p in problems)


def _payouts_app(get_model: type | None = None) -> FastAPI:
    """An app with the emulator's payout routes only; ``get_model`` swaps the GET route's response model."""
    app = FastAPI()
    for route in payouts.router.routes:
        assert isinstance(route, APIRoute)
        swap = get_model is not None and "GET" in route.methods
        app.router.add_api_route(
            route.path,
            route.endpoint,
            methods=list(route.methods),
            status_code=route.status_code,
            response_model=get_model if swap else route.response_model,
            responses=route.responses,
        )
    return app


def test_drift_check_reports_a_changed_route_response_shape() -> None:
    """Swap the response model of one emulator route: its generated document now differs from the contract."""

    def shape_drift(app: FastAPI) -> list[str]:
        # a bare FastAPI app also documents its default 422; only the response shape matters here
        prefix = "GET /v1/payouts/{reference} 200"
        return [p for p in compare(openapi_document(), app.openapi()) if p.startswith(prefix)]

    assert shape_drift(_payouts_app()) == []
    changed = shape_drift(_payouts_app(Transfer))
    assert changed and "required fields differ" in changed[0] and "amount" in changed[0], changed


def _one_case_against(app: Any, contract: dict[str, Any], path: str, method: str) -> None:
    schema = schemathesis.openapi.from_dict(contract)
    schema.app = app
    sandbox = app.state.sandbox
    token, _ = token_for(sandbox, sandbox.state.credentials["demo-test-client"])
    case = schema[path][method].Case()
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[status_code_conformance, response_schema_conformance],
    )


def test_conformance_passes_for_the_emulator_as_it_is() -> None:
    _one_case_against(create_app(SandboxConfig()), openapi_document(), "/v1/wallet", "GET")


def test_conformance_reports_an_emulator_route_answering_another_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = wallet_routes.json_response

    def wallet_with_numbers(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
        return real(status, {"items": [{"balances": {"GHS": 10.5}}]})  # no name, money as a JSON number

    monkeypatch.setattr(wallet_routes, "json_response", wallet_with_numbers)
    with pytest.raises(FailureGroup) as failure:
        _one_case_against(create_app(SandboxConfig()), openapi_document(), "/v1/wallet", "GET")
    assert "Response violates schema" in str(failure.value.exceptions)


def test_conformance_reports_a_contract_whose_status_code_changed() -> None:
    contract = openapi_document()
    responses = contract["paths"]["/v1/wallet"]["get"]["responses"]
    responses["201"] = responses.pop("200")
    with pytest.raises(FailureGroup) as failure:
        _one_case_against(create_app(SandboxConfig()), contract, "/v1/wallet", "GET")
    assert "Undocumented status code" in str(failure.value.exceptions)
    assert "Received: 200" in str(failure.value.exceptions)


def test_conformance_reports_a_contract_requiring_a_field_the_emulator_leaves_out() -> None:
    contract = openapi_document()
    contract["components"]["schemas"]["WalletAccount"]["required"].append("iban")
    with pytest.raises(FailureGroup) as failure:
        _one_case_against(create_app(SandboxConfig()), contract, "/v1/wallet", "GET")
    assert "iban" in str(failure.value.exceptions)


async def test_emulator_serves_the_contract() -> None:
    import httpx

    app = create_app(SandboxConfig())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as client:
        response = await client.get("/openapi.yaml")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/yaml")
    assert response.text == openapi_text()
    assert response.headers["Request-Id"]
    assert "/openapi.yaml" not in app.openapi()["paths"]


def test_every_operation_names_its_permission_and_idempotency_key() -> None:
    contract = openapi_document()
    scopes = contract["components"]["securitySchemes"]["clientCredentials"]["flows"]["clientCredentials"][
        "scopes"
    ]
    for method, path, op in operations(contract):
        permissions = [op["x-permission"]] if "x-permission" in op else op["x-permission-any-of"]
        assert permissions and set(permissions) <= set(scopes), (method, path)
        headers = [p.get("$ref", "") for p in op.get("parameters", [])]
        assert (method == "POST") == ("#/components/parameters/IdempotencyKey" in headers), (method, path)


# ------------------------------------------------------------------ links: create → get, as the contract says


def _links() -> list[tuple[str, str, str]]:
    """(source operationId, status, link name) for every link of the contract."""
    found = []
    for _, _, op in operations(openapi_document()):
        for status, response in op["responses"].items():
            for name in response.get("links", {}):
                found.append((op["operationId"], status, name))
    return found


def _pointer(body: Any, expression: str) -> Any:
    """Value of a ``$response.body#/a/0/b`` runtime expression."""
    assert expression.startswith("$response.body#/"), expression
    for part in expression.split("#/", 1)[1].split("/"):
        body = body[int(part)] if isinstance(body, list) else body[part]
    return body


class _Walker:
    """Calls operations of the contract by operationId on one emulator, validating every answer."""

    def __init__(self, **config: Any) -> None:
        self.contract = openapi_document()
        self.clock = ManualClock(START)
        self.app = create_app(SandboxConfig(clock=self.clock, delivery_delay_s=2.0, **config))
        self.schema = schemathesis.openapi.from_dict(openapi_document())
        self.schema.app = self.app
        sandbox = self.app.state.sandbox
        token, _ = token_for(sandbox, sandbox.state.credentials["demo-test-client"])
        self.auth = {"Authorization": f"Bearer {token}"}
        self.by_id = {op["operationId"]: (m, p, op) for m, p, op in operations(self.contract)}

    def example(self, operation_id: str) -> Any:
        _, _, op = self.by_id[operation_id]
        if "requestBody" not in op:
            return None
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = self.contract["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        return schema.get("examples", [{}])[0]

    def call(self, operation_id: str, path_parameters: dict[str, Any] | None = None, body: Any = None) -> Any:
        method, path, op = self.by_id[operation_id]
        headers = dict(self.auth)
        if method == "POST":
            headers["Idempotency-Key"] = f"key-{uuid.uuid4().hex}"
        kwargs: dict[str, Any] = {"path_parameters": path_parameters or {}, "headers": headers}
        if method in ("POST", "PUT"):
            kwargs["body"] = self.example(operation_id) if body is None else body
        case = self.schema[path][method].Case(**kwargs)
        response = case.call()
        case.validate_response(response, checks=[status_code_conformance, response_schema_conformance])
        assert 200 <= response.status_code < 300, (operation_id, response.status_code, response.text)
        return response.json() if response.content else None


@pytest.mark.parametrize("source,status,link", _links())
def test_links_lead_from_a_created_record_to_its_reads(source: str, status: str, link: str) -> None:
    walker = _Walker()
    # A settlement policy whose calbank destination fails (…9991), so a settled run can be retried.
    policy = {
        "schedule": "manual",
        "destinations": [
            {"type": "bank", "provider": "calbank", "accountNumber": "1400000009991", "share": "50"},
            {"type": "mobile_money", "provider": "mtn", "accountNumber": "233240000001", "share": "50"},
        ],
    }
    walker.call("putSettlementPolicy", body=policy)
    path_parameters: dict[str, Any] = {}
    if source == "createResettlement":
        failed = walker.call("createSettlement", body={"reference": "stl-to-retry"})
        walker.clock.advance(5)
        path_parameters = {"id": failed["id"]}
    created = walker.call(source, path_parameters)
    walker.clock.advance(5)  # a settlement run completes (failed_partial), a payout is delivered
    _, _, op = walker.by_id[source]
    spec = op["responses"][status]["links"][link]
    parameters = {name: _pointer(created, expr) for name, expr in spec["parameters"].items()}
    target = walker.call(spec["operationId"], parameters)
    if walker.by_id[spec["operationId"]][0] == "GET":
        key, value = next(iter(parameters.items()))
        assert target[{"checkoutId": "id"}.get(key, key)] == value


def test_events_the_emulator_records_match_the_contract_webhook_payloads() -> None:
    """Each event of the feed (as delivered to webhooks) conforms to the document's payload of its type."""
    walker = _Walker(allow_local_webhooks=True)
    with TestClient(walker.app) as admin:
        created = admin.post(
            "/_sandbox/businesses/demo/test/webhook-endpoints", json={"url": "http://127.0.0.1:9/hook"}
        )
    assert created.status_code == 201, created.text
    for operation_id in ("createPayout", "createCollection", "createUtilityPurchase", "createTransfer"):
        walker.call(operation_id)
    walker.call("createSettlement")
    walker.clock.advance(10)
    feed = walker.call("listEvents")
    contract = walker.contract
    seen = set()
    for event in feed["items"]:
        post = contract["webhooks"][event["type"]]["post"]
        ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        validator = OAS31Validator({"$ref": ref, "components": contract["components"]})
        assert [e.message for e in validator.iter_errors(event)] == [], event
        seen.add(event["type"])
    assert {"payout.status_changed", "collection.status_changed", "settlement.status_changed"} <= seen, seen
