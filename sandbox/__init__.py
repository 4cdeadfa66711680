"""payops sandbox: a stateful FastAPI emulator of the Payments Service (see README.md)."""

from __future__ import annotations

from .app import create_app
from .cli import run_sandbox
from .clock import Clock, ManualClock, SystemClock
from .config import SandboxConfig
from .server import SandboxServer

__all__ = [
    "Clock",
    "ManualClock",
    "SandboxConfig",
    "SandboxServer",
    "SystemClock",
    "create_app",
    "run_sandbox",
]
