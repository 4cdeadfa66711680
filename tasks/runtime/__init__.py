"""What every task runs on: the Payments clients, one request rate shared by every run and the requests
in flight, the retry policy of API tasks, memory, child processes, scratch directories, credentials, per-run
meters and progress.

May import: connectors, store; nothing else in tasks (contract tasks-by-feature).
"""
