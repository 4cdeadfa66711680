"""Signed approvals: what lets the payout flow itself check that a run was approved under its rule.

The console (or ``payops approve``, after checking the user's password) signs, with the approval key:

* the **run rule** when it starts a run: who may not approve (the uploader and the initiator) and the tiers in
  force, bound to the sheet (``params.approval_rule``);
* each **approval**: the flow run id, the run's total and the approver's name.

The flow, paused for input, accepts ``approve: true`` only with enough valid approvals for its own total
under the signed rule, from distinct approvers who neither uploaded nor started the run. Anything else (a
resume from the Prefect UI or API without signatures, a signature over another run or another total) is a
rejection that says why, and nothing is sent. Signing: ``itsdangerous`` with HMAC-SHA256, one salt per kind.

The key comes from ``PAYOPS_APPROVAL_KEY`` or the Prefect Secret block named by ``PAYOPS_APPROVAL_KEY_BLOCK``
(default ``payops-approval-key``), never from flow parameters.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

from store.approvals import ApprovalRule
from tasks.money import money

KEY_ENV, BLOCK_ENV, DEFAULT_BLOCK = "PAYOPS_APPROVAL_KEY", "PAYOPS_APPROVAL_KEY_BLOCK", "payops-approval-key"
MIN_KEY_LENGTH = 16
LABEL = "payops.approval"  # flow run labels: what a paused run waits for (read by the console and the CLI)


class ApprovalRefused(ValueError):
    """An approval (or a run rule) the flow cannot accept; the message says why."""


class ApprovalKeyMissing(RuntimeError):
    pass


def _home_key() -> str:
    """The key `payops serve` keeps in this payops home (the file its record names), or ''."""
    from pathlib import Path

    from store.home import read_serve_record

    record = read_serve_record(running=False)
    if record is None or not record.approval_key_file:
        return ""
    try:
        return Path(record.approval_key_file).read_text().strip()
    except OSError:
        return ""


async def load_approval_key() -> bytes:
    """The signing key: ``PAYOPS_APPROVAL_KEY``; else, with no block named, the one `payops serve` keeps in
    this payops home; else the Secret block. ApprovalKeyMissing names the variable and the block."""
    value = os.environ.get(KEY_ENV, "") or ("" if os.environ.get(BLOCK_ENV) else _home_key())
    name = os.environ.get(BLOCK_ENV) or DEFAULT_BLOCK
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
    return URLSafeSerializer(key, salt=f"payops.{kind}.v1", signer_kwargs={"digest_method": hashlib.sha256})


@dataclass(frozen=True)
class Requirement:
    """How many approvals a run needs and who may not give them."""

    required: int
    excluded: tuple[str, ...] = ()
    initiator: str | None = None


def sign_rule(key: bytes, *, source: str, initiator: str, uploader: str, rule: ApprovalRule) -> str:
    return _serializer(key, "rule").dumps(
        {"source": source, "initiator": initiator, "uploader": uploader, "tiers": rule.to_json()}
    )


def read_rule(key: bytes, token: str, source: str, total: Decimal) -> Requirement:
    """The requirement a signed rule sets for this sheet's total; ApprovalRefused when forged or moved."""
    try:
        data: Any = _serializer(key, "rule").loads(token)
    except BadSignature:
        raise ApprovalRefused("the run's approval rule is not signed by this console's key") from None
    if data.get("source") != source:
        raise ApprovalRefused("the run's approval rule was signed for another sheet")
    rule = ApprovalRule.from_json(data["tiers"])
    excluded = tuple(sorted({data["initiator"], data["uploader"]} - {""}))
    return Requirement(rule.required(total), excluded, data["initiator"] or None)


def sign_approval(key: bytes, *, run_id: str, total: Decimal, approver: str) -> str:
    return _serializer(key, "approval").dumps({"run": run_id, "total": money(total), "approver": approver})


def check_approvals(
    key: bytes, tokens: list[str], *, run_id: str, total: Decimal, need: Requirement
) -> list[str]:
    """The approvers behind ``tokens`` if they meet ``need`` for this run and total, else ApprovalRefused."""
    approvers: list[str] = []
    for token in tokens:
        try:
            data: Any = _serializer(key, "approval").loads(token)
        except BadSignature:
            raise ApprovalRefused("an approval is not signed by the console's key") from None
        who = str(data.get("approver"))
        if data.get("run") != run_id:
            raise ApprovalRefused(f"the approval by {who} was signed for another run")
        if data.get("total") != money(total):
            signed = data.get("total")
            raise ApprovalRefused(
                f"the approval by {who} was signed for a total of {signed}, this run pays {money(total)}"
            )
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


def approval_labels(total: Decimal, need: Requirement) -> dict[str, str]:
    """The labels the flow puts on its run before pausing: total, approvals needed, who may not approve."""
    return {
        f"{LABEL}.total": money(total),
        f"{LABEL}.required": str(need.required),
        f"{LABEL}.excluded": ",".join(need.excluded),
    }
