"""The run page's reconciliation section: the run's checks, newest first (the payops database)."""

from __future__ import annotations

from typing import Any

from payops.store.reconciliation import ReconciliationStore
from sqlalchemy import Engine

HISTORY = 20


def reconciliation_context(engine: Engine, summary: dict[str, Any] | None) -> dict[str, Any]:
    """``reconciliation``: the latest status and the checks of the run the summary names (empty without
    a summary or a label: a run that sent nothing has nothing to reconcile)."""
    label = (summary or {}).get("label")
    if not label:
        return {"reconciliation": None}
    checks = ReconciliationStore(engine).checks("run", str(label), HISTORY)
    if not checks:
        return {"reconciliation": None}
    return {"reconciliation": {"status": checks[0].status, "checks": checks}}
