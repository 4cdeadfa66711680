"""What an API route raises to answer with an error: a status and one line for the person behind the call."""

from __future__ import annotations


class ApiError(Exception):
    """``status`` and a one-line ``message`` (the JSON answer's ``detail``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
