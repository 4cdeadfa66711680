"""The service's ledger: run reconciliation, the daily close, the transactions report and the wallet
watch.

May import: connectors, store, and in tasks payouts, events, intake,
reports, runtime and wire (contract tasks-by-feature).
"""
