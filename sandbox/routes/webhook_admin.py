"""``/_sandbox/...`` console equivalent for webhooks: endpoints, secrets, test events, delivery log, replay,
and ``POST /_sandbox/webhooks/deliver-due`` (flush due attempts; used with a ManualClock).

Not part of the spec; left out of the OpenAPI document like the other admin endpoints.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ..clock import iso
from ..delivery import deliver_due, ensure_worker
from ..engine import webhooks as wh
from ..errors import not_found
from ..idempotency import json_response
from ..runtime import Sandbox, get_sandbox
from ..state import EnvState

router = APIRouter(prefix="/_sandbox", include_in_schema=False)
BASE = "/businesses/{business}/{environment}/webhook-endpoints"
DNS_TIMEOUT_S = 2.0


def _env(sandbox: Sandbox, business: str, environment: str) -> EnvState:
    env = sandbox.state.envs.get((business, environment))
    if env is None:
        raise not_found(f"business {business} ({environment})")
    return env


async def _checked_url(sandbox: Sandbox, url: str) -> str:
    """Refuse non-https and private URLs; the host's DNS answers count (unresolvable hosts are accepted)."""
    wh.check_url(url, [], allow_local=sandbox.config.allow_local_webhooks)
    host = urlsplit(url).hostname or ""
    resolved: list[str] = []
    if host not in wh.LOCAL_HOSTS:
        try:
            infos = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM), DNS_TIMEOUT_S
            )
            resolved = [str(info[4][0]) for info in infos]
        except (OSError, TimeoutError, UnicodeError):
            resolved = []  # not resolvable now: delivery attempts will report network errors
    wh.check_url(url, resolved, allow_local=sandbox.config.allow_local_webhooks)
    return url


class EndpointCreate(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    url: str = Field(min_length=1, max_length=2048)
    event_types: list[str] | None = Field(default=None, alias="eventTypes")
    enabled: bool = True
    description: str | None = Field(default=None, max_length=200)
    legacy: bool = False


class EndpointEdit(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    url: str | None = Field(default=None, min_length=1, max_length=2048)
    event_types: list[str] | None = Field(default=None, alias="eventTypes")
    enabled: bool | None = None
    description: str | None = Field(default=None, max_length=200)


@router.post(BASE, status_code=201)
async def create_endpoint(
    request: Request, business: str, environment: str, body: EndpointCreate
) -> Response:
    """Register an endpoint; the answer carries ``secret`` (shown only here)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    url = await _checked_url(sandbox, body.url)
    with sandbox.state.lock:
        sandbox.state.advance(env)
        endpoint = wh.create_endpoint(
            env, url, body.event_types, body.enabled, body.description, body.legacy, sandbox.clock.now()
        )
        out = {**endpoint.to_wire(), "secret": endpoint.secret}
    ensure_worker(sandbox)
    return json_response(201, out)


@router.get(BASE)
async def list_endpoints(request: Request, business: str, environment: str) -> Response:
    """The environment's endpoints (no secrets)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        return json_response(200, {"items": [e.to_wire() for e in env.resources.endpoints.values()]})


@router.get(BASE + "/{endpoint_id}")
async def read_endpoint(request: Request, business: str, environment: str, endpoint_id: str) -> Response:
    """One endpoint (no secret)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        return json_response(200, wh.get_endpoint(env, endpoint_id).to_wire())


@router.patch(BASE + "/{endpoint_id}")
async def edit_endpoint(
    request: Request, business: str, environment: str, endpoint_id: str, body: EndpointEdit
) -> Response:
    """Edit URL, subscribed types (``null`` = all), enabled switch or description; the secret stays."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    changes = body.model_dump(by_alias=True, exclude_unset=True)
    if changes.get("url") is not None:
        await _checked_url(sandbox, changes["url"])
    with sandbox.state.lock:
        sandbox.state.advance(env)
        endpoint = wh.edit_endpoint(env, endpoint_id, changes, sandbox.clock.now())
        return json_response(200, endpoint.to_wire())


@router.delete(BASE + "/{endpoint_id}", status_code=204)
async def delete_endpoint(request: Request, business: str, environment: str, endpoint_id: str) -> Response:
    """Remove an endpoint (pending deliveries are cancelled)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        wh.delete_endpoint(env, endpoint_id)
    return Response(status_code=204)


@router.post(BASE + "/{endpoint_id}/rotate-secret")
async def rotate_secret(request: Request, business: str, environment: str, endpoint_id: str) -> Response:
    """New secret (shown once); the old one also signs deliveries for 24 h (clock)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        endpoint = wh.rotate_secret(env, endpoint_id, sandbox.clock.now())
        return json_response(200, {**endpoint.to_wire(), "secret": endpoint.secret})


@router.post(BASE + "/{endpoint_id}/test")
async def send_test(request: Request, business: str, environment: str, endpoint_id: str) -> Response:
    """Queue a ``webhook.test`` event for this (enabled) endpoint."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        delivery = wh.send_test_event(env, endpoint_id, sandbox.clock.now())
        out = delivery.to_wire()
    ensure_worker(sandbox)
    return json_response(202, out)


@router.get(BASE + "/{endpoint_id}/deliveries")
async def list_deliveries(
    request: Request,
    business: str,
    environment: str,
    endpoint_id: str,
    status: Annotated[Literal["pending", "succeeded", "failed", "cancelled"] | None, Query()] = None,
) -> Response:
    """Delivery log of an endpoint, oldest first."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        wh.get_endpoint(env, endpoint_id)
        items = [
            d.to_wire()
            for d in env.resources.deliveries.values()
            if d.endpoint_id == endpoint_id and (status is None or d.status == status)
        ]
    return json_response(200, {"items": items})


@router.post("/businesses/{business}/{environment}/webhook-deliveries/{delivery_id}/replay")
async def replay_delivery(request: Request, business: str, environment: str, delivery_id: str) -> Response:
    """Replay a succeeded or failed delivery (same event id, new delivery)."""
    sandbox = get_sandbox(request)
    env = _env(sandbox, business, environment)
    with sandbox.state.lock:
        out = wh.replay(env, delivery_id, sandbox.clock.now()).to_wire()
    ensure_worker(sandbox)
    return json_response(202, out)


@router.post("/webhooks/deliver-due")
async def flush_due(request: Request, _body: Annotated[dict[str, object] | None, Body()] = None) -> Response:
    """Bring every environment up to the clock and make every due delivery attempt now."""
    sandbox = get_sandbox(request)
    attempted = await deliver_due(sandbox)
    return json_response(200, {"attempted": attempted, "now": iso(sandbox.clock.now())})
