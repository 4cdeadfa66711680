"""Documentation held to the code: the CLI reference, run summaries and states, benchmark figures."""
