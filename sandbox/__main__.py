"""``python -m sandbox --port 8080 ...``: run the emulator (same flags as ``payops sandbox``)."""

from __future__ import annotations

import argparse

from .cli import run_sandbox


def main(argv: list[str] | None = None) -> None:
    """Parse flags and serve."""
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="Payments Service emulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--env-file", default=None, help="write the export PAYOPS_... lines to this file")
    parser.add_argument("--seed", default=None, help="JSON file with more businesses")
    parser.add_argument("--rate-limit", type=float, default=None, help="requests per second per credential")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of /v1 requests answered 5xx")
    parser.add_argument("--fault-seed", type=int, default=None)
    parser.add_argument("--token-ttl", type=int, default=300, help="access token lifetime, seconds")
    parser.add_argument("--delivery-delay", type=float, default=2.0, help="seconds until a payout is final")
    parser.add_argument("--allow-local-webhooks", action="store_true")
    parser.add_argument("--history", type=int, default=0, help="delivered payouts of the day before")
    args = parser.parse_args(argv)
    run_sandbox(
        host=args.host,
        port=args.port,
        env_file=args.env_file,
        seed=args.seed,
        rate_limit=args.rate_limit,
        fault_rate=args.fault_rate,
        token_ttl=args.token_ttl,
        delivery_delay=args.delivery_delay,
        allow_local_webhooks=args.allow_local_webhooks,
        fault_seed=args.fault_seed,
        history=args.history,
    )


if __name__ == "__main__":
    main()
