"""Idempotency-Key helpers."""

from __future__ import annotations

import uuid

__all__ = ["new_idempotency_key", "check_idempotency_key"]


def new_idempotency_key() -> str:
    """A fresh random Idempotency-Key (flows should pass deterministic keys instead)."""
    return uuid.uuid4().hex


def check_idempotency_key(key: str) -> str:
    """Return ``key`` if it has the spec's length (1 to 255), else raise ``ValueError``."""
    if not 1 <= len(key) <= 255:
        raise ValueError("Idempotency-Key must be 1 to 255 characters")
    return key
