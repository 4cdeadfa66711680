"""Signed starts and approvals: what lets the payout flow itself check who started a run and that it was
approved under the policy, whatever channel started or resumed it.

* A **start** is signed by the payops server (the console: the operator who submitted, the uploader of the
  sheet) and passed in the run's parameters (``params.start``), bound to the sheet. A run without one (Prefect
  UI, API, schedule, automation) has no payops initiator: whoever holds Prefect's login could have started it,
  so none of them may approve it (:attr:`Start.could_start`), and its audit entry says so.
* Each **approval** is signed over what the approver was shown (:class:`Subject`): the flow run, the
  fingerprint of its rows, the total per currency, the row count, and the approver's name.

The flow reads how many approvals it needs from the policy in the payops database (store/approvals.py),
never from a signature or a parameter that could lower it, and accepts only enough valid approvals from
distinct approvers who neither uploaded nor started the run (nor, started outside payops, could have).

**Who signs, who verifies**: the payops server alone holds the Ed25519 private key and signs
(tasks/approval/approval_keys.py: ``load_signing_key``); flows hold only the public half and verify
(``load_verify_key``), so whoever can verify cannot sign. Tokens are JWS compact tokens (PyJWT, ``EdDSA``)
whose ``kind`` claim (start, approval, rejection) is checked on reading: one kind never passes for another.
Keys are never flow parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from payops.store.approval_requests import ROW_FIELDS
from payops.tasks.approval.approval_keys import ApprovalKeyMissing
from payops.tasks.wire.money import money
from payops.tasks.wire.references import rows_digest

__all__ = [
    "CHANNELS",
    "ApprovalKeyMissing",
    "ApprovalRefused",
    "Requirement",
    "Start",
    "Subject",
    "check_approvals",
    "exclusion_reason",
    "fingerprint",
    "read_rejecter",
    "read_start",
    "row_fields",
    "sign_approval",
    "sign_rejection",
    "sign_start",
]

CHANNELS = ("console", "cli", "api")
"""Channels a signed start comes through; a run without one is a ``prefect`` start (unsigned)."""
UNSIGNED = "prefect"
ALGORITHM = "EdDSA"


class ApprovalRefused(ValueError):
    """An approval (or a signed start) the flow cannot accept; the message says why."""


def _sign(key: Ed25519PrivateKey, kind: str, claims: Mapping[str, Any]) -> str:
    if not isinstance(key, Ed25519PrivateKey):
        raise TypeError("signing needs the approval key's private half, which only the payops server holds")
    return jwt.encode({**claims, "kind": kind}, key, algorithm=ALGORITHM)


def _read(key: Ed25519PublicKey, token: str, kind: str) -> dict[str, Any] | None:
    """The claims of ``token`` when it is of ``kind`` and signed by ``key``'s private half, else None."""
    try:
        data = jwt.decode(token, key, algorithms=[ALGORITHM], options={"require": ["kind"]})
    except jwt.InvalidTokenError:
        return None
    return data if data.get("kind") == kind else None


def exclusion_reason(initiator: str | None) -> str:
    """Why an excluded user may not approve a run: they started or uploaded it, or (a run started outside
    payops, ``initiator`` None) they hold Prefect's login and so could have started it."""
    if initiator is None:
        return "holds Prefect's login (could have started this run outside payops)"
    return "uploaded or started this run"


# -- who started the run -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    """Who started a run and through which channel. ``prefect``: no signed start, no payops initiator; then
    ``could_start`` names the payops users who hold Prefect's login (any of them could have started it)."""

    channel: str = UNSIGNED
    initiator: str | None = None
    uploader: str | None = None
    could_start: tuple[str, ...] = ()

    @property
    def excluded(self) -> tuple[str, ...]:
        """Who may not approve the run: whoever started it, whoever uploaded its sheet, and whoever could
        have started it without payops."""
        return tuple(sorted({n for n in (self.initiator, self.uploader, *self.could_start) if n}))

    def describe(self) -> str:
        if self.initiator is None:
            holders = (
                f"; holders of Prefect's login ({', '.join(sorted(self.could_start))}) may not approve"
                if self.could_start
                else ""
            )
            return (
                "started outside payops (Prefect UI, API, schedule or automation): no payops initiator"
                + holders
            )
        how = {"console": "in the console", "cli": "from the CLI", "api": "through the payops API"}.get(
            self.channel, f"via {self.channel}"
        )
        upload = (
            f", sheet uploaded by {self.uploader}"
            if self.uploader and self.uploader != self.initiator
            else ""
        )
        return f"started by {self.initiator} {how}{upload}"


def sign_start(
    key: Ed25519PrivateKey, *, source: str, initiator: str, channel: str, uploader: str | None = None
) -> str:
    """The payops server's signed record of who started a run of this sheet, through which channel."""
    if channel not in CHANNELS:
        raise ValueError(f"channel {channel!r}: a signed start comes through one of {', '.join(CHANNELS)}")
    return _sign(
        key,
        "start",
        {"source": source, "initiator": initiator, "uploader": uploader or initiator, "channel": channel},
    )


def read_start(key: Ed25519PublicKey, token: str, source: str) -> Start:
    """The start a token records for this sheet; ApprovalRefused when forged or signed for another sheet."""
    data = _read(key, token, "start")
    if data is None:
        raise ApprovalRefused("the run's start is not signed by this installation's approval key")
    if data.get("source") != source:
        raise ApprovalRefused("the run's start was signed for another sheet")
    return Start(str(data["channel"]), str(data["initiator"]), str(data.get("uploader") or data["initiator"]))


# -- what an approver signs -------------------------------------------------------------------------------
def fingerprint(row_tuples: Iterable[tuple[str, ...]]) -> str:
    """SHA-256 over every row as an approver sees it (store.approval_requests.ROW_FIELDS, as text)."""
    return rows_digest(row_tuples)


def row_fields(row: Any, reference: str) -> tuple[str, ...]:
    """A payout row's ROW_FIELDS as text (the same text the approval page stores and shows)."""
    values = {
        "row": row.row,
        "reference": reference,
        "amount": money(row.amount),
        "currency": row.currency,
        "provider": row.provider,
        "destination_type": row.destination_type,
        "destination": row.destination,
        "payee": row.payee_name or "",
        "note": row.note or "",
    }
    return tuple(str(values[f]) for f in ROW_FIELDS)


@dataclass(frozen=True)
class Subject:
    """What an approval covers: one flow run, its rows' fingerprint, total per currency, row count."""

    run_id: str
    fingerprint: str
    totals: Mapping[str, str]  # currency -> two-decimal amount
    rows: int

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "fingerprint": self.fingerprint,
            "totals": dict(self.totals),
            "rows": self.rows,
        }

    @classmethod
    def of(cls, run_id: str, fingerprint_: str, totals: Mapping[str, Decimal], rows: int) -> Subject:
        return cls(run_id, fingerprint_, {c: money(t) for c, t in sorted(totals.items())}, rows)


@dataclass(frozen=True)
class Requirement:
    """How many approvals a run needs and who may not give them."""

    required: int
    excluded: tuple[str, ...] = ()
    initiator: str | None = None


def sign_approval(key: Ed25519PrivateKey, subject: Subject, approver: str) -> str:
    """The payops server's signature of ``approver``'s approval of exactly ``subject``."""
    return _sign(key, "approval", {**subject.as_json(), "approver": approver})


def check_approvals(
    key: Ed25519PublicKey, tokens: list[str], subject: Subject, need: Requirement
) -> list[str]:
    """The approvers behind ``tokens`` if they meet ``need`` for this subject; else ApprovalRefused."""
    approvers: list[str] = []
    for token in tokens:
        data = _read(key, token, "approval")
        if data is None:
            raise ApprovalRefused("an approval is not signed by this installation's approval key")
        who = str(data.get("approver"))
        if data.get("run") != subject.run_id:
            raise ApprovalRefused(f"the approval by {who} was signed for another run")
        if data.get("totals") != dict(subject.totals):
            signed = ", ".join(f"{c} {a}" for c, a in (data.get("totals") or {}).items())
            pays = ", ".join(f"{c} {a}" for c, a in subject.totals.items())
            raise ApprovalRefused(f"the approval by {who} was signed for {signed}, this run pays {pays}")
        if data.get("rows") != subject.rows or data.get("fingerprint") != subject.fingerprint:
            raise ApprovalRefused(f"the approval by {who} was signed for other rows than this run sends")
        if who in need.excluded:
            raise ApprovalRefused(f"{who} {exclusion_reason(need.initiator)} and cannot approve it")
        if who in approvers:
            raise ApprovalRefused(f"{who} approved twice; each approval must come from a different person")
        approvers.append(who)
    if len(approvers) < need.required:
        have = f"{len(approvers)} valid signed approval{'s' if len(approvers) != 1 else ''}"
        raise ApprovalRefused(f"this run needs {need.required} signed approvals, got {have}")
    return approvers


def sign_rejection(key: Ed25519PrivateKey, *, run_id: str, rejecter: str) -> str:
    """A rejection by a named user (the console, ``payops approve --reject``): the flow names them."""
    return _sign(key, "rejection", {"run": run_id, "rejecter": rejecter})


def read_rejecter(key: Ed25519PublicKey, tokens: list[str], run_id: str) -> str | None:
    """The name in a valid rejection token for this run, else None (a rejection needs no signature: an
    unsigned one is simply unnamed)."""
    for token in tokens:
        data = _read(key, token, "rejection")
        if data is not None and data.get("run") == run_id and data.get("rejecter"):
            return str(data["rejecter"])
    return None
