"""The operations console: the app, its error pages and its routers (deployments/console/routes/).

Login, sheet upload with validation preview, run pages with the approval page, reports, notices, admin, and
the webhook receiver. Every route gets the user, role and CSRF check from FastAPI dependencies (deps.py).
"""

from __future__ import annotations

import logging
import secrets
import threading

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from payops.deployments.approving import DecisionError

from .api import API_PREFIX, create_api
from .errors import ConsoleError, LoginNeeded
from .routes import ROUTERS
from .runs import DeploymentLauncher, LocalLauncher, RunLauncher
from .security import SecurityHeaders
from .settings import ConsoleSettings
from .state import HERE, Console
from .webhooks import Emitter, WebhookService, default_emitter, webhook_router

log = logging.getLogger("payops.console")


def default_launcher(settings: ConsoleSettings) -> RunLauncher:
    """The configured payout deployment (its runs handed to warm processes when ``warm_runs``), else local
    single-process mode."""
    deployment = settings.payout_deployment
    if not deployment:
        return LocalLauncher()
    if not settings.warm_runs:
        return DeploymentLauncher(deployment)
    from payops.deployments.warm_runs import WarmRuns

    warm = WarmRuns()
    threading.Thread(target=warm.warm_up, name="warm-runs", daemon=True).start()
    return DeploymentLauncher(deployment, warm)


def create_app(
    settings: ConsoleSettings | None = None,
    *,
    launcher: RunLauncher | None = None,
    emitter: Emitter = default_emitter,
) -> FastAPI:
    """The console app. ``launcher`` default: the configured deployment, else local single-process mode."""
    settings = settings or ConsoleSettings()
    if launcher is None:
        launcher = default_launcher(settings)
    console = Console(settings, launcher, emitter)
    # -- webhooks: durable inbox, receiver and relay (all in .webhooks); the relay runs in the lifespan --
    webhooks = WebhookService(settings, emitter)
    app = FastAPI(
        title="payops console", docs_url=None, redoc_url=None, openapi_url=None, lifespan=webhooks.lifespan
    )
    app.state.webhooks = webhooks
    app.include_router(webhook_router(webhooks.receiver))
    # -- end webhooks --
    app.state.console = console
    app.add_middleware(SecurityHeaders)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(ConsoleError)
    async def console_error(request: Request, exc: ConsoleError) -> Response:
        context = {"message": exc.message, "links": exc.links}
        return await console.render(request, "error.html", context, status=exc.status)

    @app.exception_handler(DecisionError)
    async def decision_error(request: Request, exc: DecisionError) -> Response:
        return await console.render(request, "error.html", {"message": exc.message}, status=exc.status)

    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        return RedirectResponse("/login", status_code=303)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        ref = secrets.token_hex(4)
        log.error("console error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
        message = f"Something went wrong (reference {ref}). The details are in the console's log."
        if type(exc).__name__ in {"ConnectError", "ConnectTimeout", "PrefectHTTPStatusError", "ReadTimeout"}:
            message = f"The Prefect server did not answer (reference {ref}). Try again in a moment."
        return console.templates.TemplateResponse(
            request, "error.html", {"message": message, "account": None}, status_code=500
        )

    for router in ROUTERS:
        app.include_router(router)
    app.mount(API_PREFIX, create_api(console))
    return app


__all__ = ["Console", "create_app"]
