"""What a console route raises to answer with an error page or the login page."""

from __future__ import annotations


class ConsoleError(Exception):
    """An error page for the user: ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoginNeeded(Exception):
    """No live session: the user is sent to the login page."""
