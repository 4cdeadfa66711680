"""``python -m payops.deployments.console [--host 127.0.0.1] [--port 8400]``: the console under uvicorn."""

from __future__ import annotations

import argparse
import logging

import uvicorn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m payops.deployments.console", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from payops.deployments.console import create_app

    # An open browser connection must not hold a stop (payops serve gives its children a few seconds).
    uvicorn.run(
        create_app(),
        host=args.host,
        port=args.port,
        log_level="warning",
        proxy_headers=False,
        timeout_graceful_shutdown=2,
    )


if __name__ == "__main__":
    main()
