"""The console's edge: login throttle, client address behind proxies, session-bound CSRF tokens, headers.

Passwords and sessions live in the database (``store.users``: argon2 via pwdlib, server-side sessions).

Throttle: an attempt *reserves* a slot before the slow password hash and *settles* it after, so parallel
guesses cannot all pass a check made before any failure was recorded; failures count for the whole window,
and a successful login clears none of them. Limits apply per client address and,
higher, per account (an attacker spreading guesses over many addresses still meets the account limit, while
one noisy client cannot lock everybody out). Kept in process memory: with several replicas each counts alone.

Client address: the peer address, unless the peer is a configured trusted proxy; then ``X-Forwarded-For`` is
read from the right, skipping trusted proxies, and the first other address is the client.

CSRF: ``itsdangerous`` signs the session's id hash (logged in) or a random pre-login nonce (login form) with
a per-purpose salt; a form passes only with a token over the *current* session, so a token from another
browser or an anonymous visit is refused.
"""

from __future__ import annotations

import ipaddress
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass
class LoginThrottle:
    """Failed logins within ``window_s``: at most ``per_client`` per address and ``per_account`` per name."""

    per_client: int = 5
    per_account: int = 10
    window_s: float = 300.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _pending: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _keys(self, client: str, account: str) -> list[tuple[str, int]]:
        return [(f"client:{client}", self.per_client), (f"account:{account.lower()}", self.per_account)]

    def _used(self, key: str) -> int:
        q = self._failures.get(key)
        cutoff = time.monotonic() - self.window_s
        while q and q[0] < cutoff:
            q.popleft()
        return (len(q) if q else 0) + self._pending.get(key, 0)

    def reserve(self, client: str, account: str) -> bool:
        """Take a slot for one attempt (before checking the password); False: over the limit, don't check."""
        with self._lock:
            keys = self._keys(client, account)
            if any(self._used(k) >= limit for k, limit in keys):
                return False
            for k, _ in keys:
                self._pending[k] = self._pending.get(k, 0) + 1
            return True

    def settle(self, client: str, account: str, ok: bool) -> None:
        """After the check: a failure stays counted for the window, whatever else the address does. A
        success clears nothing: one valid account must not let an address guess other passwords without
        limit."""
        with self._lock:
            for k, _ in self._keys(client, account):
                self._pending[k] -= 1
                if not self._pending[k]:
                    del self._pending[k]
                if not ok:
                    self._failures.setdefault(k, deque()).append(time.monotonic())


def parse_networks(text: str | None) -> list[Network]:
    """``"10.0.0.1, 10.1.0.0/16"`` → networks; a bad entry raises ValueError naming it."""
    out = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"trusted proxy {part!r} is not an IP address or network") from None
    return out


def _in(address: str, networks: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in n for n in networks)


def client_address(request: Request, trusted: list[Network]) -> str:
    """The client's address; ``X-Forwarded-For`` counts only when the peer is a trusted proxy."""
    peer = request.client.host if request.client else "?"
    if not trusted or not _in(peer, trusted):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _in(hop, trusted):
            return hop[:64]
    return peer


class CsrfTokens:
    """Tokens binding a form to one session (or one pre-login nonce)."""

    def __init__(self, key: bytes, max_age_s: int) -> None:
        self._s = URLSafeTimedSerializer(key, salt="payops.console.csrf")
        self.max_age_s = max_age_s

    def token(self, binding: str) -> str:
        return self._s.dumps(binding)

    def ok(self, token: object, binding: str | None) -> bool:
        if not isinstance(token, str) or not binding or len(token) > 512:
            return False
        try:
            return secrets.compare_digest(str(self._s.loads(token, max_age=self.max_age_s)), binding)
        except BadSignature:
            return False


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: the headers above on every response; ``Cache-Control: no-store`` on everything but
    the static files (pages, reports and downloads hold payee data)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not static:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)
