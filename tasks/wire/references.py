"""Every reference and Idempotency-Key payops sends: the one module that builds them.

A run label names one run. Everything sent for a run is a pure function of the label and the validated
sheet, so a re-run, a retry or a crash recovery sends byte-identical requests and the service replays them.
Settlement retries and on-demand runs derive theirs from the run id or a stable seed the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from payops.connectors.payments.models import REFERENCE_PATTERN as _REFERENCE_PATTERN

REFERENCE_PATTERN = re.compile(_REFERENCE_PATTERN)
"""The service's reference pattern (declared by the connector), compiled."""

REFERENCE_MAX = 64
LABEL_MAX = 64
"""The longest run label a run's parameters accept."""
RETRY_PREFIX = "payops-rs-"
SETTLE_NOW_PREFIX = "payops-sn-"
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_SLUG_MAX = 40


def _digest(data: str | bytes, n: int) -> str:
    """First ``n`` hex digits of the SHA-256 of ``data`` (the only hash behind references and keys)."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:n]


# ---------------------------------------------------------------------------------------------------------
# Run labels, payout and purchase references
# ---------------------------------------------------------------------------------------------------------


def label_slug(label: str) -> str:
    """Reference-safe form of a label, at most 40 characters, distinct for distinct labels."""
    slug = _INVALID.sub("-", label.strip()).strip("-_")
    if not slug:
        return f"run-{_digest(label, 8)}"
    if slug != label or len(slug) > _SLUG_MAX:
        # The slug changed or was cut: add a digest so two labels never share references.
        slug = f"{slug[: _SLUG_MAX - 9].rstrip('-_')}-{_digest(label, 8)}"
    return slug


def rows_digest(rows: Iterable[tuple[object, ...]]) -> str:
    """SHA-256 (hex) over rows, each as the ``repr`` of its values as text, one per line: the one fingerprint
    of a sheet's rows (its default label, what an approver signs)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(tuple(str(v) for v in row)).encode())
        h.update(b"\n")
    return h.hexdigest()


def content_label(canonical_rows: Iterable[tuple[object, ...]]) -> str:
    """Default label: a fingerprint of the validated content (so re-saving the same sheet keeps the label)."""
    return f"sheet-{rows_digest(canonical_rows)[:12]}"


def row_reference(label: str, sheet_row: int) -> str:
    """Payout (or purchase) reference for a row that has none in the sheet."""
    ref = f"{label_slug(label)}-r{sheet_row}"
    assert REFERENCE_PATTERN.match(ref), ref
    return ref


class SheetRow(Protocol):
    """A sheet row as references read it: its own reference (None when the sheet has none) and its row."""

    @property
    def reference(self) -> str | None: ...

    @property
    def row(self) -> int: ...


def payout_reference(row: SheetRow, label: str) -> str:
    """The reference a row is sent under: the sheet's own, else `row_reference`. The wire body, the approval
    fingerprint, the paid-before digest and the run reconciliation read it here: they must agree."""
    return row.reference or row_reference(label, row.row)


_ROW_REFERENCE = re.compile(r"(?P<slug>[A-Za-z0-9][A-Za-z0-9_-]*?)-r(?P<row>[0-9]+)")


def row_reference_slug(reference: str) -> str | None:
    """The label slug of a reference shaped like `row_reference` (``<slug>-r<row>``), else None: what
    reconciliation uses to tie a payout it did not send to the run whose references it carries."""
    m = _ROW_REFERENCE.fullmatch(reference)
    return m.group("slug") if m else None


def is_settlement_reference(reference: str) -> bool:
    """A settlement run payops started (retry or settle-now), or one of its payments (``<run ref>-<n>``)."""
    return reference.startswith((RETRY_PREFIX, SETTLE_NOW_PREFIX))


def batch_reference(label: str, index: int) -> str:
    """Batch reference: one per label and batch position."""
    return f"{label_slug(label)}-b{index:04d}"


# ---------------------------------------------------------------------------------------------------------
# Idempotency-Keys of sheet runs: label, position and body fixed, so a changed body never reuses a key
# ---------------------------------------------------------------------------------------------------------


def canonical_json(body: Mapping[str, Any]) -> bytes:
    """The one serialisation a key hashes a body in: sorted keys, no spaces, UTF-8.

    Purchase keys hashed ``json.dumps(body, sort_keys=True)`` before (spaces, ASCII escapes): a run begun then
    and sent again now carries a new key with the same reference and body, which the service answers with the
    first answer (spec, Errors: ``duplicate_reference``), so nothing is bought twice
    (tests/flows/test_utility_purchases.py)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def batch_idempotency_key(label: str, index: int, body: Mapping[str, Any]) -> str:
    """Idempotency-Key of payout batch ``index`` of a run (its wire body hashed: `canonical_json`)."""
    return f"payops-batch:{_digest(label, 16)}:{index}:{_digest(canonical_json(body), 24)}"


def purchase_idempotency_key(label: str, sheet_row: int, body: Mapping[str, Any]) -> str:
    """Idempotency-Key of the utility purchase of sheet row ``sheet_row`` (body hashed: `canonical_json`)."""
    return f"payops-utility:{_digest(label, 16)}:{sheet_row}:{_digest(canonical_json(body), 24)}"


# ---------------------------------------------------------------------------------------------------------
# Settlement runs
# ---------------------------------------------------------------------------------------------------------


def _stable_suffix(value: str, room: int) -> str:
    """``value`` reduced to letters and digits when it fits in ``room``, else a hash of it (always stable)."""
    compact = _NOT_ALNUM.sub("", value)
    if compact and len(compact) <= room:
        return compact
    return _digest(value, room)


def resettlement_reference(run_id: str) -> str:
    """The one reference our retry of run ``run_id`` ever uses: ``payops-rs-`` + the id without dashes."""
    return RETRY_PREFIX + _stable_suffix(run_id, REFERENCE_MAX - len(RETRY_PREFIX))


def resettlement_idempotency_key(run_id: str) -> str:
    """Deterministic Idempotency-Key of the retry of ``run_id`` (same key, same body on every attempt)."""
    return f"payops-resettle:{run_id}"[:255]


def settle_now_reference(seed: str) -> str:
    """Reference of an on-demand run from a stable seed (e.g. the Prefect flow run id)."""
    return SETTLE_NOW_PREFIX + _stable_suffix(seed, REFERENCE_MAX - len(SETTLE_NOW_PREFIX))


def settle_now_idempotency_key(reference: str) -> str:
    """Idempotency-Key of the on-demand run ``reference``."""
    return f"payops-settle-now:{reference}"


def is_our_retry(reference: str | None) -> bool:
    """A run started by ``resettle`` (its reference carries our prefix): never retried again."""
    return bool(reference) and reference.startswith(RETRY_PREFIX)
