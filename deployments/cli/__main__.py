"""``python -m payops.deployments.cli``: the same as the ``payops`` command."""

from payops.deployments.cli import main

main()
