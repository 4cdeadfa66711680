"""The outcomes a run ends with, as its summary, its alerts and its notices name them."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How a run ended (docs/runs.md, *Outcomes, states and exit codes*); a member equals its JSON text."""

    COMPLETED = "completed"
    DRY_RUN = "dry_run"
    INVALID_INPUT = "invalid_input"
    """refused for its rows (or the file as a whole)"""
    PREFLIGHT_FAILED = "preflight_failed"
    """refused by its pre-flight (balance, limits, names, no credentials to price it)"""
    NOT_APPROVED = "not_approved"
    VALID = "valid"
    """`payops check`: the sheet would be sent"""
    INCOMPLETE = "incomplete"
    """settlement runs still running at the poll deadline"""
    POLICY_ALERT = "policy_alert"
    """the settlement retry policy asks a person to look"""


REFUSED_OUTCOMES = frozenset({Outcome.INVALID_INPUT, Outcome.PREFLIGHT_FAILED})
"""A sheet refused before anything was sent: its rows (``invalid_input``) or its pre-flight
(``preflight_failed``). The run ends Refused (flows.outcomes), alerts as failed, and its operator is told."""
