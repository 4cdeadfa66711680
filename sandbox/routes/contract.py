"""``GET /openapi.yaml``: the authored contract of the Payments Service, for clients in other languages.

The emulator's own generated document stays at ``/openapi.json``; this one is the contract both the
client and the emulator are tested against (``connectors/payments/openapi.yaml``).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from payops.connectors.payments.contract import openapi_text

router = APIRouter(include_in_schema=False)


@router.get("/openapi.yaml")
async def contract_document() -> Response:
    """The OpenAPI 3.1 document as shipped (no auth: it is public)."""
    return Response(openapi_text(), media_type="application/yaml")
