"""payops: Prefect flows around the Payments Service API, with a faithful emulator of the service.

Everything installs under this one name: ``payops.connectors`` (the API client), ``payops.tasks`` (the work,
by feature), ``payops.flows``, ``payops.deployments`` (CLI, console, serve), ``payops.store`` (the payops
database) and ``payops.sandbox`` (the emulator). The folders live at the repository's top (setup.py).
"""

FOLDERS = ("connectors", "deployments", "flows", "sandbox", "store", "tasks")
"""The repository's top-level folders that install below ``payops`` (setup.py reads this line)."""
