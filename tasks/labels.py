"""Run labels and the references derived from them.

A run label names one payout run. Everything sent for a run is a pure function of the label and the validated
sheet, so a re-run, a retry or a crash recovery sends byte-identical requests and the service replays them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from decimal import Decimal

REFERENCE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")
_SLUG_MAX = 40


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def label_slug(label: str) -> str:
    """Reference-safe form of a label, at most 40 characters, distinct for distinct labels."""
    slug = _INVALID.sub("-", label.strip()).strip("-_")
    if not slug:
        return f"run-{_digest(label)}"
    if slug != label or len(slug) > _SLUG_MAX:
        # The slug changed or was cut: add a digest so two labels never share references.
        slug = f"{slug[: _SLUG_MAX - 9].rstrip('-_')}-{_digest(label)}"
    return slug


def content_label(canonical_rows: Iterable[tuple[object, ...]]) -> str:
    """Default label: a fingerprint of the validated content (so re-saving the same sheet keeps the label)."""
    h = hashlib.sha256()
    for row in canonical_rows:
        h.update(repr(tuple(str(v) for v in row)).encode())
        h.update(b"\n")
    return f"sheet-{h.hexdigest()[:12]}"


def row_reference(label: str, sheet_row: int) -> str:
    """Payout reference for a row that has none in the sheet."""
    ref = f"{label_slug(label)}-r{sheet_row}"
    assert REFERENCE_PATTERN.match(ref), ref
    return ref


def batch_reference(label: str, index: int) -> str:
    """Batch reference: one per label and batch position."""
    return f"{label_slug(label)}-b{index:04d}"


def batch_idempotency_key(label: str, index: int, canonical_body: bytes) -> str:
    """Idempotency-Key of a batch: label, index and body fixed, so a changed body never reuses a key."""
    body = hashlib.sha256(canonical_body).hexdigest()[:24]
    return f"payops-batch:{_digest(label, 16)}:{index}:{body}"


def fresh_reference(reference: str, attempt_tag: str) -> str:
    """A new reference for a row being paid again on purpose (the report's resubmit sheet)."""
    base = reference[: 64 - len(attempt_tag) - 1]
    return f"{base}-{attempt_tag}"


def money(value: Decimal) -> str:
    """Decimal string with two places, as the wire wants."""
    return f"{value.quantize(Decimal('0.01'))}"
