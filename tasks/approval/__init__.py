"""Approval of a payout run: the policy read from the payops database, signed starts and approvals, and
what each approver decided.

May import: connectors, store, and in tasks payouts, events,
intake, reports, runtime and wire (contract tasks-by-feature).
"""
