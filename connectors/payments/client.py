"""The async ``PaymentsClient``: one object, one method per endpoint, grouped by resource."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from . import _resources as r
from ._auth import PaymentsAuth
from ._idempotency import check_idempotency_key, new_idempotency_key
from ._retry import TRANSPORT_CONNECT, TRANSPORT_TIMEOUT, delay, should_retry
from ._settings import PaymentsSettings
from .errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    PaymentsError,
    error_from_response,
)

__all__ = ["PaymentsClient", "new_idempotency_key"]

logger = logging.getLogger("payops.connectors.payments")

M = TypeVar("M", bound=BaseModel)
_ENDPOINT_EXT = "payops_endpoint"
_CALLS_SCOPE: ContextVar[Counter[str] | None] = ContextVar("payments_api_calls_scope", default=None)


class PaymentsClient:
    """Async client of the Payments Service API.

    ``transport`` (e.g. ``httpx.ASGITransport(app)`` or ``httpx.MockTransport``) is used for both the API
    and the token requests. ``sleep`` and ``rng`` make the retry waits injectable in tests.
    ``api_calls`` counts HTTP requests actually sent per ``"METHOD /v1/path/{template}"``, retries and
    401 replays included (token requests are counted in ``token_requests``).
    """

    def __init__(
        self,
        settings: PaymentsSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._api_calls: Counter[str] = Counter()
        self._sleep = sleep or asyncio.sleep
        self._rng = rng or random.Random()
        timeout = httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s)
        limits = httpx.Limits(
            max_connections=settings.max_connections, max_keepalive_connections=settings.max_connections
        )
        common: dict[str, Any] = {"timeout": timeout, "headers": {"User-Agent": settings.user_agent}}
        if transport is None:
            common["limits"] = limits
        self._token_http = httpx.AsyncClient(transport=transport, **common)
        self._auth = PaymentsAuth(settings, self._token_http, clock=clock)
        self._http = httpx.AsyncClient(
            base_url=settings.base_url,
            transport=transport,
            event_hooks={"request": [self._count_request]},
            **common,
        )
        self.collections = r.Collections(self)
        self.checkouts = r.Checkouts(self)
        self.payouts = r.Payouts(self)
        self.payout_batches = r.PayoutBatches(self)
        self.utilities = r.Utilities(self)
        self.fee_quotes = r.FeeQuotes(self)
        self.settlements = r.Settlements(self)
        self.settlement_policy = r.SettlementPolicies(self)
        self.transfers = r.Transfers(self)
        self.recipients = r.Recipients(self)
        self.payment_methods = r.PaymentMethods(self)
        self.party_lookups = r.PartyLookups(self)
        self.limits = r.Limits(self)
        self.wallet = r.Wallet(self)
        self.transactions = r.Transactions(self)
        self.events = r.Events(self)

    def __repr__(self) -> str:
        return f"PaymentsClient(base_url={self.settings.base_url!r}, client_id={self.settings.client_id!r})"

    @property
    def token_requests(self) -> int:
        """Number of token requests made so far."""
        return self._auth.token_requests

    async def __aenter__(self) -> PaymentsClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close both HTTP clients."""
        await self._http.aclose()
        await self._token_http.aclose()

    @property
    def api_calls(self) -> Counter[str]:
        """Requests sent per endpoint: in the open ``counting()`` scope if any, else since creation."""
        scoped = _CALLS_SCOPE.get()
        return scoped if scoped is not None else self._api_calls

    @contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        """Count this context's requests apart (a task sharing a client with others; child tasks included)."""
        token = _CALLS_SCOPE.set(Counter())
        try:
            yield _CALLS_SCOPE.get()  # type: ignore[misc]
        finally:
            _CALLS_SCOPE.reset(token)

    async def _count_request(self, request: httpx.Request) -> None:
        endpoint = request.extensions.get(_ENDPOINT_EXT)
        if endpoint:
            self._api_calls[str(endpoint)] += 1
            scoped = _CALLS_SCOPE.get()
            if scoped is not None:
                scoped[str(endpoint)] += 1

    # ------------------------------------------------------------------------------------------------
    # Core request loop
    # ------------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        template: str,
        *,
        path_params: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        body: BaseModel | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> httpx.Response:
        """Send one API call with the retry policy; return the 2xx response or raise a PaymentsError.

        For POST the Idempotency-Key (the caller's, else a new one) and the body bytes are fixed
        before the loop, so every attempt sends the same key and body.
        """
        method = method.upper()
        path = template.format(**{k: quote(str(v), safe="") for k, v in (path_params or {}).items()})
        endpoint = f"{method} {template}"
        headers = {"Accept": "application/json"}
        if method == "POST":
            headers["Idempotency-Key"] = check_idempotency_key(idempotency_key or new_idempotency_key())
        content: bytes | None = None
        if body is not None or method in ("POST", "PUT"):
            payload = body.model_dump(by_alias=True, mode="json") if isinstance(body, BaseModel) else body
            content = json.dumps(payload if payload is not None else {}, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        query = _clean_params(params)
        settings = self.settings
        attempt = 0
        while True:
            request = self._http.build_request(
                method,
                path,
                params=query,
                content=content,
                headers=headers,
                extensions={_ENDPOINT_EXT: endpoint},
            )
            status: int | None = None
            code: str | None = None
            transport_error: str | None = None
            response_headers: Mapping[str, str] | None = None
            try:
                response = await self._http.send(request, auth=self._auth)
            except httpx.TimeoutException as exc:
                error: PaymentsError = APITimeoutError(
                    f"request timed out ({type(exc).__name__})", method=method, path=path
                )
                transport_error = TRANSPORT_TIMEOUT
            except httpx.TransportError as exc:
                error = APIConnectionError(
                    f"connection error ({type(exc).__name__})", method=method, path=path
                )
                transport_error = TRANSPORT_CONNECT
            except APITimeoutError as exc:  # from the token request
                error, transport_error = exc, TRANSPORT_TIMEOUT
            except APIConnectionError as exc:  # from the token request
                error, transport_error = exc, TRANSPORT_CONNECT
            except APIStatusError as exc:  # the token request was refused
                error, status, code = exc, exc.status, exc.code
                if exc.retry_after is not None:
                    response_headers = {"Retry-After": str(exc.retry_after)}
            else:
                if response.is_success:
                    logger.debug(
                        "%s %s -> %s (request_id=%s, attempt=%d)",
                        method,
                        template,
                        response.status_code,
                        response.headers.get("Request-Id"),
                        attempt,
                    )
                    return response
                error = error_from_response(response)
                status, code, response_headers = response.status_code, error.code, response.headers
            retry = should_retry(
                status,
                code,
                method,
                attempt,
                max_retries=settings.max_retries,
                transport_error=transport_error,
            )
            wait = 0.0
            if retry:
                wait = delay(
                    attempt,
                    response_headers,
                    self._rng,
                    status=status,
                    code=code,
                    base=settings.backoff_base_s,
                    cap=settings.backoff_max_s,
                )
                retry = wait <= settings.max_retry_wait_s
            if not retry:
                level = logging.WARNING if error.transient else logging.DEBUG
                logger.log(level, "%s %s failed: %s", method, template, error)
                error.retries_spent = attempt >= settings.max_retries
                raise error
            logger.info(
                "%s %s: %s; retry %d/%d in %.2fs",
                method,
                template,
                error,
                attempt + 1,
                settings.max_retries,
                wait,
            )
            await self._sleep(wait)
            attempt += 1

    async def call(
        self,
        model: type[M],
        method: str,
        template: str,
        **kwargs: Any,
    ) -> M:
        """``request`` and parse the JSON answer into ``model``."""
        response = await self.request(method, template, **kwargs)
        return parse_response(model, response)


def parse_response(model: type[M], response: httpx.Response) -> M:
    """Validate a 2xx body against ``model``; raise ``APIResponseValidationError`` on mismatch."""
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise APIResponseValidationError(
            f"unexpected {model.__name__} body: {exc.error_count()} validation error(s)",
            status=response.status_code,
            request_id=response.headers.get("Request-Id"),
        ) from exc


def _clean_params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Drop ``None`` values and render values as the wire expects (Decimal → str, bool → true/false)."""
    if not params:
        return None
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, Decimal):
            out[key] = format(value, "f")
        elif hasattr(value, "isoformat"):
            out[key] = value.isoformat()
        else:
            out[key] = str(value)
    return out
