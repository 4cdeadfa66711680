"""`payops login` and `payops logout`: a person's own token for a payops server, kept in their own config.

`payops login` asks the server for a personal API token with the user's name and password and keeps it in
`PayopsSettings.logins_file` (mode 0600, one token per server); every later command to that server sends it.
`payops logout` revokes it on the server and forgets it. Nothing else is kept: no key, no database, no
service credential.
"""

from __future__ import annotations

import typer
from payops.deployments.cli._common import EXIT_INVALID, cli_settings, fail
from payops.deployments.cli.front_door import (
    ServerRefused,
    forget_login,
    front_door,
    refused,
    save_login,
    saved_logins,
    server_url,
)
from payops.deployments.cli.identity import read_password

URL = typer.Option(None, "--url", help="The payops server (default: PAYOPS_URL, else this home's serve)")


def login(
    user: str = typer.Option(..., "--user", help="Your payops user name (the password is asked)"),
    url: str | None = URL,
) -> None:
    """Log in to a payops server: its token for you is kept in your own config (0600) for later commands."""
    settings = cli_settings()
    if url:
        settings = settings.model_copy(update={"url": url})
    with front_door(settings.model_copy(update={"api_token": None})) as door:
        if door is None:
            fail("which payops server? give --url URL or set PAYOPS_URL", EXIT_INVALID)
        try:
            issued = door.sign_in(user, read_password(), "payops login")
        except ServerRefused as exc:
            refused(exc)
        path = save_login(settings, door.url, issued["token"], issued["user"])
    typer.echo(f"logged in to {door.url} as {issued['user']} ({issued['role']}); token kept in {path}")


def logout(
    url: str | None = URL,
) -> None:
    """Log out of a payops server: its token for you is revoked there and forgotten here."""
    settings = cli_settings()
    if url:
        settings = settings.model_copy(update={"url": url})
    where = server_url(settings)
    if where is None or where not in saved_logins(settings):
        fail(f"not logged in to {where or 'any payops server'}", EXIT_INVALID)
    with front_door(settings.model_copy(update={"api_token": None})) as door:
        if door is None:  # the server was known a moment ago: serve stopped meanwhile
            fail(f"the payops server {where} is gone; the login is kept")
        try:
            said = door.call("POST", "/logout")
        except ServerRefused as exc:
            if exc.status != 401:  # a token already revoked by an admin: forget it all the same
                refused(exc)
            said = {"message": "the token was no longer valid"}
    forget_login(settings, where)
    typer.echo(f"logged out of {where}: {said['message']}")
