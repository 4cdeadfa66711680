"""Operator password, signed session cookie and CSRF tokens.

Password: kept only as a scrypt hash in memory. scrypt (stdlib ``hashlib.scrypt``) is memory-hard, so a
leaked hash is costly to brute-force on GPUs, and one ~50 ms check per login is cheap here; PBKDF2 would do,
scrypt is the stronger of the two stdlib choices.

Cookies: ``itsdangerous`` is not installed in this environment, so tokens are signed with HMAC-SHA256:
``base64url(json payload) + "." + base64url(hmac)``, checked in constant time, with an expiry.

CSRF: signed double submit. A random nonce lives in an HttpOnly cookie; every form carries
``HMAC(key, "csrf:" + nonce)``; a POST passes only when both agree. Cookies are SameSite=Lax as well.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections import deque
from dataclasses import dataclass, field

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PasswordHash:
    """A scrypt hash of the operator password; the clear text is not kept."""

    def __init__(self, password: str) -> None:
        if not password:
            raise ValueError("the console password may not be empty")
        self._salt = secrets.token_bytes(16)
        self._hash = self._derive(password)

    def _derive(self, password: str) -> bytes:
        return hashlib.scrypt(
            password.encode("utf-8"), salt=self._salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32
        )

    def verify(self, password: str) -> bool:
        return hmac.compare_digest(self._derive(password), self._hash)

    def __repr__(self) -> str:
        return "PasswordHash(scrypt)"


class Signer:
    """HMAC-SHA256 signed, expiring tokens."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, data: bytes) -> bytes:
        return hmac.new(self._key, data, hashlib.sha256).digest()

    def sign(self, payload: dict[str, object], ttl_s: int) -> str:
        body = json.dumps({**payload, "exp": int(time.time()) + ttl_s}, separators=(",", ":")).encode()
        return f"{_b64(body)}.{_b64(self._mac(body))}"

    def unsign(self, token: str | None) -> dict[str, object] | None:
        """The payload when the signature is good and not expired, else None."""
        if not token or token.count(".") != 1:
            return None
        body_text, mac_text = token.split(".")
        try:
            body, mac = _unb64(body_text), _unb64(mac_text)
        except ValueError:
            return None
        if not hmac.compare_digest(self._mac(body), mac):
            return None
        try:
            payload = json.loads(body)
        except ValueError:
            return None
        if not isinstance(payload, dict) or int(payload.get("exp", 0)) < time.time():
            return None
        return payload

    def csrf_token(self, nonce: str) -> str:
        return _b64(self._mac(f"csrf:{nonce}".encode()))

    def csrf_ok(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.csrf_token(nonce), token)


@dataclass
class LoginThrottle:
    """At most ``max_failures`` failed logins per client address within ``window_s``."""

    max_failures: int = 5
    window_s: float = 300.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def _recent(self, client: str) -> deque[float]:
        q = self._failures.setdefault(client, deque())
        cutoff = time.monotonic() - self.window_s
        while q and q[0] < cutoff:
            q.popleft()
        return q

    def blocked(self, client: str) -> bool:
        return len(self._recent(client)) >= self.max_failures

    def failed(self, client: str) -> None:
        self._recent(client).append(time.monotonic())

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


def new_nonce() -> str:
    return secrets.token_urlsafe(24)
