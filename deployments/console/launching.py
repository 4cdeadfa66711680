"""Starting a payout run from the server: the one place a run's start is signed, launched and audited, for
the console's upload form and the JSON API alike."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import Request
from payops.flows.payouts import PayoutRunParams
from payops.flows.run_params import name_from_parameters
from payops.store.users import Account
from payops.tasks.approval.approvals import sign_start

from .state import Console


async def launch_payout_run(
    console: Console,
    request: Request,
    account: Account,
    params: PayoutRunParams,
    *,
    channel: str,
    uploader: str | None = None,
    **audit: Any,
) -> tuple[UUID, str]:
    """Sign who starts the run (``account``, and who uploaded its sheet) with the server's approval key
    when it has one, start it (the console's launcher: the payout deployment, or a thread in local mode)
    and audit ``payops.run.started``. Returns the flow run's id and name (its label, else the sheet's name:
    one name everywhere)."""
    key = await console.approval_key()
    if key is not None:
        params.start = sign_start(
            key, source=params.source, initiator=account.name, uploader=uploader, channel=channel
        )
    name = name_from_parameters({"params": params})
    run_id = await console.launcher.start(params, name)
    console.audit(
        request,
        account.name,
        "run.started",
        f"run:{run_id}",
        channel=channel,
        uploaded_by=uploader or account.name,
        require_approval=params.require_approval,
        dry_run=params.dry_run,
        **audit,
    )
    return run_id, name
