"""Tables the connector tests derive from the authored contract (``connectors/payments/openapi.yaml``)."""

from __future__ import annotations

from payops.connectors.payments.contract import openapi_document

from tests.openapi_contract import operations


def contract_endpoints() -> set[str]:
    """Every "METHOD /v1/path" operation of the contract."""
    return {f"{method} {path}" for method, path, _ in operations(openapi_document())}


def contract_error_rows(*, choices: bool = False) -> list[tuple[int, str]]:
    """(status, code) rows of the contract's error catalogue: the spec's codes, or payops' own (choices)."""
    catalogue = openapi_document()["components"]["x-error-codes"]
    return [
        (int(row["status"]), row["code"])
        for row in catalogue
        if bool(row.get("x-payops-choice", False)) == choices
    ]
