"""What payops writes on the wire: money as a decimal string, and every reference and Idempotency-Key it
sends (the keys that make a re-run replay instead of paying twice).

May import: connectors, store; nothing else in tasks (contract tasks-by-feature).
"""
