"""The outcomes a run ends with, as its summary, its alerts and its notices name them."""

from __future__ import annotations

REFUSED_OUTCOMES = frozenset({"invalid_input", "preflight_failed"})
"""A sheet refused before anything was sent: its rows (``invalid_input``) or its pre-flight
(``preflight_failed``). The run ends Refused (flows.outcomes), alerts as failed, and its operator is told."""
