"""Signed starts and approvals: what lets the payout flow itself check who started a run and that it was
approved under the policy, whatever channel started or resumed it.

* A **start** is signed by the console (the operator who submitted, the uploader of the sheet) or the CLI
  (the payops user who authenticated with a password or a personal API token) and passed in the run's
  parameters (``params.start``), bound to the sheet. A run without one (Prefect UI, API, schedule,
  automation) has no payops initiator: every approver may approve it, and its audit entry says so.
* Each **approval** is signed over what the approver was shown (:class:`Subject`): the flow run, the
  fingerprint of its rows, the total per currency, the row count, and the approver's name.

The flow reads how many approvals it needs from the policy in the payops database (store/approvals.py),
never from a signature or a parameter that could lower it, and accepts only enough valid approvals from
distinct approvers who neither uploaded nor started the run. Signing: ``itsdangerous`` with HMAC-SHA256, one
salt per kind.

The key comes from ``PAYOPS_APPROVAL_KEY`` or the Prefect Secret block named by ``PAYOPS_APPROVAL_KEY_BLOCK``
(default ``payops-approval-key``), read by the caller's `store.settings.PayopsSettings`, never from flow
parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from payops.store.approval_requests import ROW_FIELDS
from payops.store.settings import PayopsSettings
from payops.tasks.wire.money import money

KEY_ENV, BLOCK_ENV, DEFAULT_BLOCK = "PAYOPS_APPROVAL_KEY", "PAYOPS_APPROVAL_KEY_BLOCK", "payops-approval-key"
MIN_KEY_LENGTH = 16
CHANNELS = ("console", "cli", "prefect")


class ApprovalRefused(ValueError):
    """An approval (or a signed start) the flow cannot accept; the message says why."""


class ApprovalKeyMissing(RuntimeError):
    pass


def _home_key(settings: PayopsSettings) -> str:
    """The key `payops serve` keeps in the settings' payops home (the file its record names), or ''."""
    from pathlib import Path

    from payops.store.home import read_serve_record

    record = read_serve_record(settings.home_dir(), running=False)
    if record is None or not record.approval_key_file:
        return ""
    try:
        return Path(record.approval_key_file).read_text().strip()
    except OSError:
        return ""


async def load_approval_key(settings: PayopsSettings) -> bytes:
    """The signing key: ``PAYOPS_APPROVAL_KEY``; else, with no block named, the one `payops serve` keeps in
    the payops home; else the Secret block. ApprovalKeyMissing names the variable and the block."""
    configured = settings.approval_key.get_secret_value() if settings.approval_key else ""
    value = configured or ("" if settings.approval_key_block else _home_key(settings))
    name = settings.approval_key_block or DEFAULT_BLOCK
    if not value:
        from prefect.blocks.system import Secret

        try:
            value = str((await Secret.aload(name)).get())
        except ValueError:
            value = ""
    if len(value) < MIN_KEY_LENGTH:
        raise ApprovalKeyMissing(
            f"no approval signing key: set {KEY_ENV} or save a Prefect Secret block {name!r} "
            f"(at least {MIN_KEY_LENGTH} characters)"
        )
    return value.encode()


def _serializer(key: bytes, kind: str) -> URLSafeSerializer:
    return URLSafeSerializer(key, salt=f"payops.{kind}.v2", signer_kwargs={"digest_method": hashlib.sha256})


# -- who started the run -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    """Who started a run and through which channel (``prefect``: no payops initiator)."""

    channel: str = "prefect"
    initiator: str | None = None
    uploader: str | None = None

    @property
    def excluded(self) -> tuple[str, ...]:
        """Who may not approve the run: whoever started it and whoever uploaded its sheet."""
        return tuple(sorted({n for n in (self.initiator, self.uploader) if n}))

    def describe(self) -> str:
        if self.initiator is None:
            return "started outside payops (Prefect UI, API, schedule or automation): no payops initiator"
        how = {"console": "in the console", "cli": "from the CLI"}.get(self.channel, f"via {self.channel}")
        upload = (
            f", sheet uploaded by {self.uploader}"
            if self.uploader and self.uploader != self.initiator
            else ""
        )
        return f"started by {self.initiator} {how}{upload}"


def sign_start(key: bytes, *, source: str, initiator: str, channel: str, uploader: str | None = None) -> str:
    if channel not in CHANNELS[:2]:
        raise ValueError(f"channel {channel!r}: a signed start comes from the console or the CLI")
    return _serializer(key, "start").dumps(
        {"source": source, "initiator": initiator, "uploader": uploader or initiator, "channel": channel}
    )


def read_start(key: bytes, token: str, source: str) -> Start:
    """The start a token records for this sheet; ApprovalRefused when forged or signed for another sheet."""
    try:
        data: Any = _serializer(key, "start").loads(token)
    except BadSignature:
        raise ApprovalRefused("the run's start is not signed by this installation's approval key") from None
    if data.get("source") != source:
        raise ApprovalRefused("the run's start was signed for another sheet")
    return Start(str(data["channel"]), str(data["initiator"]), str(data.get("uploader") or data["initiator"]))


# -- what an approver signs -------------------------------------------------------------------------------
def fingerprint(row_tuples: Iterable[tuple[str, ...]]) -> str:
    """SHA-256 over every row as an approver sees it (store.approval_requests.ROW_FIELDS, as text)."""
    h = hashlib.sha256()
    for values in row_tuples:
        h.update(repr(values).encode())
        h.update(b"\n")
    return h.hexdigest()


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


def sign_approval(key: bytes, subject: Subject, approver: str) -> str:
    return _serializer(key, "approval").dumps({**subject.as_json(), "approver": approver})


def check_approvals(key: bytes, tokens: list[str], subject: Subject, need: Requirement) -> list[str]:
    """The approvers behind ``tokens`` if they meet ``need`` for this subject; else ApprovalRefused."""
    approvers: list[str] = []
    for token in tokens:
        try:
            data: Any = _serializer(key, "approval").loads(token)
        except BadSignature:
            raise ApprovalRefused("an approval is not signed by this installation's approval key") from None
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
            raise ApprovalRefused(f"{who} uploaded or started this run and cannot approve it")
        if who in approvers:
            raise ApprovalRefused(f"{who} approved twice; each approval must come from a different person")
        approvers.append(who)
    if len(approvers) < need.required:
        have = f"{len(approvers)} valid signed approval{'s' if len(approvers) != 1 else ''}"
        raise ApprovalRefused(f"this run needs {need.required} signed approvals, got {have}")
    return approvers


def sign_rejection(key: bytes, *, run_id: str, rejecter: str) -> str:
    """A rejection by a named user (the console, ``payops approve --reject``): the flow names them."""
    return _serializer(key, "rejection").dumps({"run": run_id, "rejecter": rejecter})


def read_rejecter(key: bytes, tokens: list[str], run_id: str) -> str | None:
    """The name in a valid rejection token for this run, else None (a rejection needs no signature: an
    unsigned one is simply unnamed)."""
    for token in tokens:
        try:
            data: Any = _serializer(key, "rejection").loads(token)
        except BadSignature:
            continue
        if data.get("run") == run_id and data.get("rejecter"):
            return str(data["rejecter"])
    return None
