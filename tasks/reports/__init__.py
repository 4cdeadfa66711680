"""What people and machines read after a run: the run's reports (xlsx, csv, JSON summary), the one
definition of a row needing a person, table reports, Prefect artifacts, the streaming xlsx writer and the
formula guard for cells people open.

May import: connectors, store, and in tasks runtime and wire (contract tasks-by-feature).
"""
