"""Prefect events payops emits: alerts, the webhook inbox's relay, events catch-up, the service's
envelopes as events, and audit entries with their event copies.

May import: connectors, store, and in tasks runtime and wire (contract tasks-by-feature).
"""
