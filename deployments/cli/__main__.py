"""``python -m deployments.cli``: the same as the ``payops`` command."""

from deployments.cli import main

main()
