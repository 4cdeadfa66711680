"""OAuth 2.0 client-credentials auth as an ``httpx.Auth`` flow.

The token is cached in memory on a monotonic clock and renewed shortly before ``expires_in`` elapses.
One ``asyncio.Lock`` makes renewal single-flight: many concurrent requests at expiry cause one token
request. On 401 the token that was refused is dropped and the request replayed once with a new token.
Tokens are fetched with a separate bare ``httpx.AsyncClient`` (no auth, no retry hooks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from ._settings import PaymentsSettings
from .errors import APIConnectionError, APIResponseValidationError, APITimeoutError, error_from_response
from .models import TokenResponse

__all__ = ["PaymentsAuth", "AccessToken"]

logger = logging.getLogger("payops.connectors.payments.auth")


@dataclass(frozen=True)
class AccessToken:
    """A bearer token and the monotonic time after which it is renewed."""

    value: str
    renew_at: float

    def __repr__(self) -> str:  # never show the token
        return f"AccessToken(value='***', renew_at={self.renew_at:.1f})"


class PaymentsAuth(httpx.Auth):
    """Adds ``Authorization: Bearer <token>``; renews before expiry; replays once after a 401."""

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        settings: PaymentsSettings,
        token_client: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._token_client = token_client
        self._clock = clock
        self._token: AccessToken | None = None
        self._lock = asyncio.Lock()
        self.token_requests = 0

    def sync_auth_flow(self, request: httpx.Request):  # type: ignore[override]
        raise RuntimeError("PaymentsAuth is async only; use httpx.AsyncClient")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.get_token()
        request.headers["Authorization"] = f"Bearer {token.value}"
        response = yield request
        if response.status_code == 401:
            self.invalidate(token)
            token = await self.get_token()
            request.headers["Authorization"] = f"Bearer {token.value}"
            logger.info("access token refused (401); replaying once with a new token")
            yield request

    def invalidate(self, token: AccessToken) -> None:
        """Drop ``token`` if it is still the cached one (a newer token is kept)."""
        if self._token is token:
            self._token = None

    def _valid(self) -> AccessToken | None:
        token = self._token
        if token is not None and self._clock() < token.renew_at:
            return token
        return None

    async def get_token(self) -> AccessToken:
        """The cached token, or a new one fetched by exactly one caller while the others wait."""
        token = self._valid()
        if token is not None:
            return token
        async with self._lock:
            token = self._valid()
            if token is None:
                token = await self._fetch()
                self._token = token
            return token

    async def _fetch(self) -> AccessToken:
        settings = self._settings
        form = {
            "grant_type": "client_credentials",
            "client_id": settings.client_id,
            "client_secret": settings.client_secret.get_secret_value(),
            "resource": settings.resource,
        }
        self.token_requests += 1
        started = self._clock()
        try:
            response = await self._token_client.post(
                settings.token_url, data=form, headers={"Accept": "application/json"}
            )
        except httpx.TimeoutException:
            raise APITimeoutError("token request timed out", method="POST", path="/v1/oauth/token") from None
        except httpx.TransportError as exc:
            raise APIConnectionError(
                f"token request failed: {type(exc).__name__}", method="POST", path="/v1/oauth/token"
            ) from None
        if response.status_code != 200:
            raise error_from_response(response)
        try:
            parsed = TokenResponse.model_validate_json(response.content)
        except ValidationError:
            raise APIResponseValidationError(
                "token response not understood",
                status=response.status_code,
                request_id=response.headers.get("Request-Id"),
            ) from None
        lifetime = max(0.0, float(parsed.expires_in))
        margin = min(settings.token_renew_margin_s, lifetime / 2)
        logger.debug("access token obtained (expires_in=%ss)", parsed.expires_in)
        return AccessToken(value=parsed.access_token, renew_at=started + lifetime - margin)
