"""``create_app``: the FastAPI emulator of the Payments Service."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .config import SandboxConfig
from .engine.hooks import on_event
from .error_handlers import install_error_handlers
from .middleware import SandboxMiddleware
from .routes import ROUTERS
from .runtime import Sandbox


def create_app(config: SandboxConfig | None = None) -> FastAPI:
    """A fresh emulator (own state, clock and signing key) configured by ``config``."""
    sandbox = Sandbox(config or SandboxConfig())
    sandbox.state.event_hooks.append(on_event)  # webhook fan-out and settlement claims
    app = FastAPI(
        title="Payments Service (payops sandbox)",
        version="1.0.0",
        description="Stateful emulator of the Payments Service API (/_sandbox admin paths unlisted).",
    )
    app.state.sandbox = sandbox
    install_error_handlers(app)
    for router in ROUTERS:
        # The routes themselves, not `include_router`: FastAPI 0.150 keeps an included router as a branch
        # that every request walks with its own scope bookkeeping (~40% of a request's CPU for a route late
        # in the list, a party lookup, profiled). None of these routers adds a prefix, tags or dependencies
        # when included (a prefix is in its routes' paths already), so the routes are matched as before, in
        # the same order.
        app.router.routes.extend(router.routes)
    app.add_middleware(SandboxMiddleware, sandbox=sandbox)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _clean_openapi(
                get_openapi(
                    title=app.title, version=app.version, description=app.description, routes=app.routes
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _clean_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop FastAPI's default 422 responses: validation errors are answered 400 ``invalid_input``."""
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.get("responses", {})
            default_422 = responses.get("422", {})
            ref = str(
                default_422.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
            )
            if ref.endswith("/HTTPValidationError"):
                del responses["422"]
    components = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    return schema
