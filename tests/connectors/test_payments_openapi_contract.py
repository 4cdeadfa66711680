"""The client held to the authored contract (``connectors/payments/openapi.yaml``).

Everything is derived from the document: its operations, the schemas their requests and successful
responses use (each has a client model of the same name), the examples of those schemas, the error
catalogue and the webhook payloads.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from openapi_schema_validator import OAS31Validator
from payops.connectors.payments import ENDPOINTS, PaymentsClient, models
from payops.connectors.payments import errors as e
from payops.connectors.payments.contract import openapi_document

from tests.openapi_contract import operations, resolve

DOC = openapi_document()
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]
OPS = list(operations(DOC))


def _schema_name(holder: dict[str, Any] | None) -> str | None:
    schema = (holder or {}).get("content", {}).get("application/json", {}).get("schema", {})
    ref = schema.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref.startswith("#/components/schemas/") else None


def _success_schemas() -> set[str]:
    names = set()
    for _, _, op in OPS:
        for status, response in op["responses"].items():
            if status.startswith("2") and (name := _schema_name(resolve(DOC, response))):
                names.add(name)
    return names


def _request_schemas() -> set[str]:
    return {name for _, _, op in OPS if (name := _schema_name(op.get("requestBody")))}


def _conforms(name: str, instance: Any) -> list[str]:
    validator = OAS31Validator({"$ref": f"#/components/schemas/{name}", "components": DOC["components"]})
    return [error.message for error in validator.iter_errors(instance)]


def test_operations_are_unique_and_complete() -> None:
    ids = [op["operationId"] for _, _, op in OPS]
    assert len(ids) == len(set(ids)) == len(ENDPOINTS) == 32


@pytest.mark.parametrize("method,path,operation_id", [(m, p, op["operationId"]) for m, p, op in OPS])
def test_every_operation_of_the_document_has_a_client_method(
    make_client, method: str, path: str, operation_id: str
) -> None:
    endpoint = f"{method} {path}"
    assert endpoint in ENDPOINTS, f"no client method for {operation_id} ({endpoint})"
    group, name = ENDPOINTS[endpoint].split(".")
    client: PaymentsClient = make_client(lambda r: httpx.Response(500)).client
    assert callable(getattr(getattr(client, group), name))


@pytest.mark.parametrize("name", sorted(_success_schemas()))
def test_response_examples_conform_and_parse_into_the_client_model(name: str) -> None:
    model = getattr(models, name)
    examples = SCHEMAS[name].get("examples", [])
    assert examples, f"schema {name} has no example"
    for example in examples:
        assert _conforms(name, example) == []
        parsed = model.model_validate(example)
        # what the client would send back out (e.g. a cached record) still conforms
        assert _conforms(name, parsed.to_wire()) == []


@pytest.mark.parametrize("name", sorted(_request_schemas()))
def test_request_examples_are_accepted_by_the_client_request_model(name: str) -> None:
    model = getattr(models, name)
    examples = SCHEMAS[name].get("examples", [])
    if name == "CheckoutCancel":
        examples = [{}]
    assert examples, f"schema {name} has no example"
    for example in examples:
        assert _conforms(name, example) == []
        wire = model.model_validate(example).to_wire()
        assert _conforms(name, wire) == [], wire


def test_token_response_example_parses() -> None:
    (example,) = SCHEMAS["TokenResponse"]["examples"]
    assert models.TokenResponse.model_validate(example).expires_in == 300


def test_examples_fail_when_they_break_the_schema() -> None:
    """The conformance helper really checks: money as a number and a missing required field are reported."""
    bad = dict(SCHEMAS["Payout"]["examples"][0], amount=10.5)
    del bad["status"]
    problems = " ".join(_conforms("Payout", bad))
    assert "10.5" in problems and "status" in problems


def test_every_per_operation_error_code_is_in_the_catalogue_and_documented() -> None:
    catalogue = {(int(row["status"]), row["code"]) for row in DOC["components"]["x-error-codes"]}
    for method, path, op in OPS:
        for status, codes in op["x-error-codes"].items():
            assert status in op["responses"], (method, path, status)
            for code in codes:
                assert (int(status), code) in catalogue, (method, path, status, code)
        assert set(op["x-error-codes"]) == {s for s in op["responses"] if not s.startswith("2")}, (
            method,
            path,
        )


@pytest.mark.parametrize("method,path", [(m, p) for m, p, _ in OPS])
def test_every_error_code_of_an_operation_maps_to_its_class(method: str, path: str) -> None:
    op = next(o for m, p, o in OPS if (m, p) == (method, path))
    for status, codes in op["x-error-codes"].items():
        for code in codes:
            body = {"error": {"code": code, "message": "internal server error"}}
            assert _conforms("ErrorBody", body) == []
            exc = e.error_from_response(httpx.Response(int(status), json=body))
            expected = e.ERROR_CLASSES_BY_CODE.get((int(status), code))
            if expected is not None:
                assert type(exc) is expected, (status, code)
            else:  # a payops choice: the status family's class
                assert type(exc) is not e.APIStatusError and exc.code == code


def test_error_response_examples_parse_into_error_body() -> None:
    for name, response in DOC["components"]["responses"].items():
        media = response["content"]["application/json"]
        body = models.ErrorBody.model_validate(media["example"])
        assert _conforms(media["schema"]["$ref"].rsplit("/", 1)[-1], media["example"]) == [], name
        assert body.error.code


def test_rate_limited_response_documents_retry_after_and_every_response_request_id() -> None:
    assert "Retry-After" in DOC["components"]["responses"]["RateLimited"]["headers"]
    for method, path, op in OPS:
        for status, response in op["responses"].items():
            assert "Request-Id" in resolve(DOC, response)["headers"], (method, path, status)


@pytest.mark.parametrize("event_type", sorted(DOC["webhooks"]))
def test_webhook_payloads_match_the_typed_record_of_the_client(event_type: str) -> None:
    assert event_type in models.EVENT_TYPES
    post = DOC["webhooks"][event_type]["post"]
    headers = {resolve(DOC, p)["name"] for p in post["parameters"]}
    assert headers == {"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
    payload = _schema_name(post["requestBody"])
    assert payload is not None
    envelope_example = SCHEMAS["WebhookEnvelope"]["examples"][0]
    parts = SCHEMAS[payload].get("allOf", [])
    data_ref = next((p["properties"]["data"]["$ref"] for p in parts if "properties" in p), None)
    if data_ref is None:  # webhook.test: the bare envelope
        assert payload == "WebhookEnvelope"
        return
    data_schema = data_ref.rsplit("/", 1)[-1]
    data_example = (SCHEMAS[data_schema].get("examples") or [{"reference": "r", "status": "s"}])[0]
    if data_schema == "SettlementRunEventData":
        data_example = {k: v for k, v in SCHEMAS["SettlementRun"]["examples"][0].items() if k != "id"}
    event = {**envelope_example, "type": event_type, "data": data_example}
    assert _conforms(payload, event) == []
    record = models.WebhookEnvelope.model_validate(event).record()
    assert type(record).__name__ == data_schema


async def test_token_request_sends_the_documented_form(make_client) -> None:
    h = make_client(lambda r: httpx.Response(200, json={"items": []}))
    async with h.client as client:
        await client.wallet.get()
    (request,) = h.service.token_requests
    assert request.method == "POST" and request.url.path.endswith("/v1/oauth/token")
    assert request.headers["content-type"].startswith("application/x-www-form-urlencoded")
    form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
    assert _conforms("TokenRequest", form) == []
    assert set(form) == set(SCHEMAS["TokenRequest"]["properties"])
