"""The checker behind test_status_sets: payout, purchase or collection status sets spelled out outside the
connector.

Final, failed and awaiting-review statuses live in `connectors/payments/models.py` and are imported
(docs/architecture.md, "Where each rule lives"). A set, list or tuple literal in tasks/, flows/,
deployments/ or sandbox/ (the emulator follows the same sets) holding two or more of those statuses restates
one of them; this finds every such literal.
"""

from __future__ import annotations

import ast

from payops.connectors.payments.models import (
    COLLECTION_STATUSES,
    PAYOUT_STATUSES,
    UTILITY_PURCHASE_STATUSES,
)

from tests.architecture.source_scan import find_in_rooms

ROOMS = ("tasks", "flows", "deployments", "sandbox")
STATUSES = PAYOUT_STATUSES | UTILITY_PURCHASE_STATUSES | COLLECTION_STATUSES


def restated_sets(source: str, filename: str = "<source>", words: frozenset[str] | None = None) -> list[str]:
    """``file:line: literal`` for every collection literal naming two or more of ``words`` (default: the
    payout, purchase and collection statuses)."""
    words = STATUSES if words is None else words
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Set | ast.List | ast.Tuple):
            continue
        named = {
            e.value
            for e in node.elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in words
        }
        if len(named) >= 2:
            found.append(f"{filename}:{node.lineno}: {sorted(named)}")
    return found


def tree_restatements(words: frozenset[str] | None = None, home: str | None = None) -> list[str]:
    """Every restated set of ``words`` (default: statuses) in the rooms that must import them; ``home``
    (a path from the repository's root) is where the set is stated."""
    return find_in_rooms(lambda source, name: restated_sets(source, name, words), ROOMS, home)
