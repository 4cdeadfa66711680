"""Tokens (PyJWT, HS256) and the auth/permission dependency every /v1 route uses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import jwt
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .errors import ApiError
from .records import Business, Credential
from .runtime import Sandbox, get_sandbox
from .state import EnvState

bearer = HTTPBearer(auto_error=False, description="Access token from POST /auth/v1/oauth/token")

SERVED_ENV_KEY = "sandbox.served_env"


@dataclass(frozen=True)
class AuthContext:
    """Who is calling: credential, business and the environment state they may touch."""

    client_id: str
    business: Business
    env: EnvState
    permissions: frozenset[str]

    @property
    def scope(self) -> tuple[str, str]:
        """Idempotency scope: ``(business_id, environment)``."""
        return self.env.key


def mint_token(
    sandbox: Sandbox,
    *,
    client_id: str,
    business_id: str,
    environment: str,
    permissions: list[str],
    typ: str = "client",
    ttl_s: int | None = None,
) -> tuple[str, int]:
    """A signed JWT with the contract's claims; returns ``(token, expires_in)``."""
    ttl = sandbox.config.token_ttl_s if ttl_s is None else ttl_s
    iat = int(sandbox.clock.now().timestamp())
    claims = {
        "sub": client_id,
        "biz": business_id,
        "env": environment,
        "perms": sorted(permissions),
        "iat": iat,
        "exp": iat + ttl,
        "typ": typ,
    }
    return jwt.encode(claims, sandbox.jwt_secret, algorithm="HS256"), ttl


def token_for(sandbox: Sandbox, credential: Credential) -> tuple[str, int]:
    """Token of a client credential."""
    return mint_token(
        sandbox,
        client_id=credential.client_id,
        business_id=credential.business_id,
        environment=credential.environment,
        permissions=sorted(credential.permissions),
    )


@lru_cache(maxsize=1024)
def _signed_claims(secret: str, token: str) -> Mapping[str, Any]:
    """The claims of a token signed with ``secret`` (PyJWT; raises ``jwt.PyJWTError`` when not). Cached: a
    client sends the same token with every request until it expires (the signature check was a tenth of
    the emulator's CPU per listed page); expiry is checked at each use (`_claims`), never cached."""
    return MappingProxyType(
        jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            options={
                "verify_exp": False,
                "verify_iat": False,
                "require": ["sub", "biz", "env", "exp", "typ"],
            },
        )
    )


def _claims(sandbox: Sandbox, token: str) -> Mapping[str, Any]:
    try:
        claims = _signed_claims(sandbox.jwt_secret, token)
    except jwt.PyJWTError:
        raise ApiError(401, "unauthenticated", "access token is invalid") from None
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= sandbox.clock.now().timestamp():
        raise ApiError(401, "unauthenticated", "access token has expired")
    return claims


def authenticate(sandbox: Sandbox, request: Request, token: str | None, permission: str) -> AuthContext:
    """Check token, user type, rate limit, environment, business status and permission, in that order."""
    if not token:
        raise ApiError(401, "unauthenticated", "missing bearer token")
    claims = _claims(sandbox, token)
    if claims["typ"] != "client":
        raise ApiError(403, "forbidden", "a signed-in user's token is not accepted; use a client credential")
    client_id = str(claims["sub"])
    if sandbox.limiter is not None:
        wait = sandbox.limiter.acquire(client_id)
        if wait is not None:
            raise ApiError(
                429,
                "rate_limited",
                "too many requests for this credential",
                headers={"Retry-After": str(wait)},
            )
    environment = str(claims["env"])
    served = request.scope.get(SERVED_ENV_KEY)
    if served is not None and served != environment:
        raise ApiError(
            403, "environment_mismatch", f"credential belongs to {environment}, this API serves {served}"
        )
    state = sandbox.state
    business = state.businesses.get(str(claims["biz"]))
    env = state.envs.get((str(claims["biz"]), environment))
    if business is None or env is None:
        raise ApiError(401, "unauthenticated", "access token is invalid")
    if business.status == "suspended":
        raise ApiError(403, "business_suspended", "business is suspended")
    if business.status == "deactivated" and request.method == "POST":
        raise ApiError(403, "business_deactivated", "business is deactivated: no payment can be made")
    perms = frozenset(claims.get("perms") or ())
    if permission not in perms:
        raise ApiError(403, "forbidden", f"credential lacks permission {permission}")
    state.advance(env)
    return AuthContext(client_id=client_id, business=business, env=env, permissions=perms)


def require(permission: str) -> Callable[..., Awaitable[AuthContext]]:
    """Dependency: the caller's ``AuthContext`` when its token carries ``permission``."""

    async def dependency(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> AuthContext:
        token = credentials.credentials if credentials else None
        return authenticate(get_sandbox(request), request, token, permission)

    dependency.__name__ = f"require_{permission.replace('.', '_')}"
    return dependency


def _needs_token(dependant: Any) -> bool:
    return any(d.call is bearer or _needs_token(d) for d in getattr(dependant, "dependencies", ()))


def token_problem(request: Request) -> ApiError | None:
    """The 401 a request to a token-protected route gets for a missing, invalid or expired token, else None.

    FastAPI parses and validates the body before it runs the auth dependency, so a malformed body would
    otherwise answer 400 to a caller who has not authenticated. Read-only: no rate-limit token is taken.
    """
    route = request.scope.get("route")
    if not _needs_token(getattr(route, "dependant", None)):
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return ApiError(401, "unauthenticated", "missing bearer token")
    try:
        _claims(get_sandbox(request), token.strip())
    except ApiError as exc:
        return exc
    return None
