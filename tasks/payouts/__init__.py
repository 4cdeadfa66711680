"""The payout run: its sheet step, batches, submission, the pre-flight and fee quotes, polling to a final
status, the spill file, retries of failed rows and the follow-up of a finished run.

May import: connectors, store, and in tasks intake, reports,
runtime and wire (contract tasks-by-feature).
"""
