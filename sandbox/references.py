"""Request fingerprints and the per-environment reference index behind 409 ``duplicate_reference``.

A reference used once keeps its first answer: the same request under a new Idempotency-Key gets that
answer again; a different request with the same reference is refused.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .errors import ApiError
from .state import EnvState, ReferenceEntry

Outcome = tuple[int, dict[str, Any]]


def fingerprint(*parts: Any) -> str:
    """Stable hash of JSON-able parts (canonical form: sorted keys, no whitespace)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def claim_reference(env: EnvState, namespace: str, reference: str, fp: object) -> Outcome | None:
    """The first answer when ``reference`` was used with the same request before; 409 when with another.

    ``None`` means the reference is free (the caller then calls ``remember_reference`` on success).
    """
    entry = env.references.get((namespace, reference))
    if entry is None:
        return None
    if entry.fingerprint != fp:
        raise ApiError(
            409, "duplicate_reference", f"reference {reference!r} was already used by a different request"
        )
    return entry.status, entry.payload


def remember_reference(
    env: EnvState, namespace: str, reference: str, fp: object, outcome: Outcome
) -> Outcome:
    """Keep the first answer given for ``reference``; returns it."""
    env.references[(namespace, reference)] = ReferenceEntry(fp, outcome[0], outcome[1])
    return outcome
