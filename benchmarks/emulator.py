"""A fresh emulator (`payops sandbox`, its own process) for one benchmark run, its wallet and limits sized to
the sheet it will be paid.

The default seed gives the demo business 10,000,000.00 GHS and a daily limit of 50,000,000.00: enough for
100,000 payroll rows (~8.5 million), not for a million (~85 million), which the pre-flight would refuse for
want of balance and headroom. A run's emulator therefore gets the demo business with both raised to three
times the sheet's total (a re-run after a crash meets the first attempt's use of the limits), never less
than the defaults.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from payops.deployments.processes import free_port, read_env_file, start_sandbox, stop_child
from payops.sandbox.seed import DEFAULT_SEED

HEADROOM = 3
START_TIMEOUT_S = 120
"""The emulator starts in a few seconds; a machine shared with other suites can take far longer."""


def _at_least(value: str, floor: Decimal) -> str:
    return f"{max(Decimal(value), floor):.2f}"


def sized_seed(amount_total: Decimal, currency: str = "GHS") -> dict[str, Any]:
    """The default seed with the demo business's test wallet and limits raised to `HEADROOM` times
    `amount_total` (never lowered)."""
    seed = copy.deepcopy(DEFAULT_SEED)
    floor = amount_total * HEADROOM
    for business in seed["businesses"]:
        if business["id"] != "demo":
            continue
        test = business["environments"]["test"]
        test["wallet"][currency] = _at_least(test["wallet"].get(currency, "0"), floor)
        limits = test["limits"][currency]
        for period in ("daily", "monthly"):
            limits[period] = _at_least(limits[period], floor)
    return seed


@contextmanager
def fresh_emulator(
    amount_total: Decimal, latency_ms: int = 0, rate_limit: float | None = None, history: int = 0
) -> Iterator[dict[str, str]]:
    """A new emulator sized for `amount_total`, holding ``history`` delivered payouts of the day before
    (`sandbox.seed.seed_history`); its credentials put in ``os.environ`` (the flow processes started inside
    inherit them) and yielded. Stopped when the block ends."""
    options = ["--rate-limit", str(rate_limit)] if rate_limit else []
    options += ["--history", str(history)] if history else []
    with tempfile.TemporaryDirectory() as tmp:
        seed_file = Path(tmp) / "seed.json"
        seed_file.write_text(json.dumps(sized_seed(amount_total)), encoding="utf-8")
        env_file = Path(tmp) / "env"
        proc = start_sandbox(
            free_port(),
            env_file,
            latency_ms,
            "--seed",
            str(seed_file),
            *options,
            start_timeout_s=START_TIMEOUT_S,
        )
        try:
            env = read_env_file(env_file)
            os.environ.update(env)
            yield env
        finally:
            stop_child(proc)  # SIGTERM to its group, SIGKILL after 10 s
