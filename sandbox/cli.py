"""``run_sandbox``: serve the emulator until interrupted (wired into ``payops sandbox``)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import uvicorn

from .app import create_app
from .config import SandboxConfig
from .server import env_vars


def export_lines(env: dict[str, str]) -> str:
    """``export KEY=value`` lines for a shell."""
    return "".join(f"export {k}={v}\n" for k, v in env.items())


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only (mode 0600, also when it existed): the
    emulator's client settings hold its demo credential."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def tune_gc() -> None:
    """Collect garbage less often: the emulator's state (payouts, events, journal) only grows and is acyclic,
    so default thresholds make the collector rescan it over and over, for nothing (docs/performance.md)."""
    gc.collect()
    gc.freeze()  # everything built at start-up (app, routes, seed data) is never collected
    gc.set_threshold(50_000, 20, 20)


def run_sandbox(
    host: str = "127.0.0.1",
    port: int = 8080,
    env_file: str | Path | None = None,
    seed: str | Path | None = None,
    rate_limit: float | None = None,
    fault_rate: float = 0.0,
    token_ttl: int = 300,
    delivery_delay: float = 2.0,
    latency_ms: int = 0,
    allow_local_webhooks: bool = False,
    fault_seed: int | None = None,
    history: int = 0,
) -> None:
    """Print (and optionally write to ``env_file``) the demo credential's settings, then serve."""
    config = SandboxConfig(
        rate_limit_per_s=rate_limit,
        fault_rate=fault_rate,
        fault_seed=fault_seed,
        token_ttl_s=token_ttl,
        delivery_delay_s=delivery_delay,
        latency_ms=latency_ms,
        seed_file=Path(seed) if seed else None,
        allow_local_webhooks=allow_local_webhooks,
        history_payouts=history,
    )
    app = create_app(config)
    tune_gc()
    shown_host = "127.0.0.1" if host in {"0.0.0.0", "::"} else host  # noqa: S104 - display only
    lines = export_lines(env_vars(f"http://{shown_host}:{port}"))
    print(lines, end="", flush=True)
    if env_file:
        write_private(Path(env_file), lines)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="off")
