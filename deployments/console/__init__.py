"""The payops operations console: sheet upload, run status and approval, reports, webhook receiver."""

from .app import create_app
from .runs import DeploymentLauncher, LocalLauncher
from .settings import ConsoleSettings
from .webhooks import WebhookReceiver, prefect_event

__all__ = [
    "ConsoleSettings",
    "DeploymentLauncher",
    "LocalLauncher",
    "WebhookReceiver",
    "create_app",
    "prefect_event",
]
