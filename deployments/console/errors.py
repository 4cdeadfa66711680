"""What a console route raises to answer with an error page or the login page, and the console's words for
messages written for every surface (the command line's flags and the repository's docs left out)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from payops.tasks.intake import IntakeError
from payops.tasks.intake.columns import ColumnsUnmatched

CLI_HINT = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*|(?<![\w/])docs/[\w./-]+")
"""What only the command line or a repository checkout can act on: a ``--flag`` or a ``docs/`` path."""
_HINT_ASIDE = re.compile(r"\s*\([^()]*\)")


class ConsoleError(Exception):
    """An error page for the user: ``status``, a one-line ``message`` and the pages it names, linked
    (``links``: text, path)."""

    def __init__(self, status: int, message: str, links: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.links = tuple(links)


class LoginNeeded(Exception):
    """No live session: the user is sent to the login page."""


def console_words(message: str) -> str:
    """``message`` as the console says it: asides in brackets, clauses (between ``;``) and alternatives
    (after ``, or``) that point at a ``--flag`` or a ``docs/`` path left out; the rest as written."""
    if not CLI_HINT.search(message):
        return message
    message = _HINT_ASIDE.sub(lambda m: "" if CLI_HINT.search(m.group()) else m.group(), message)
    clauses = []
    for clause in message.split("; "):
        kept = [part for part in clause.split(", or ") if not CLI_HINT.search(part)]
        if kept:
            clauses.append(", or ".join(kept))
    return "; ".join(clauses) or "this cannot be done from the console"


def refusal_words(exc: IntakeError) -> str:
    """Why the console refuses a sheet: the intake's reason in console words, and for headers that leave a
    field without a column (`ColumnsUnmatched`), where to say which column holds it."""
    words = console_words(str(exc))
    if isinstance(exc, ColumnsUnmatched) and exc.fields:
        fields = ", ".join(f.replace("_", " ") for f in exc.fields)
        words += f"; choose below which column holds the {fields}"
    return words
