"""The CLI's client of the payops server (deployments/cli/front_door.py) never shows a person HTML or a
traceback: a web page where the API should be, or an error page, becomes one line naming what to check."""

from __future__ import annotations

import httpx
import pytest
from payops.deployments.cli.front_door import FrontDoor, ServerRefused

PAGE = "<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"


def door(status: int, body: str, content_type: str = "text/html") -> FrontDoor:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text=body, headers={"content-type": content_type})

    client = httpx.Client(base_url="http://payops.example", transport=httpx.MockTransport(answer))
    return FrontDoor("http://payops.example", client)


def test_a_web_page_where_the_api_should_be_is_one_line_without_html() -> None:
    with pytest.raises(ServerRefused) as caught:
        door(200, PAGE).call("GET", "/runs")
    assert caught.value.detail == (
        "http://payops.example answered text/html, not the payops API: is PAYOPS_URL the payops server?"
    )
    assert "<" not in caught.value.detail


@pytest.mark.parametrize("status", [404, 502])
def test_an_error_page_gives_the_status_words_not_the_page(status: int) -> None:
    with pytest.raises(ServerRefused) as caught:
        door(status, PAGE).call("GET", "/runs")
    assert caught.value.status == status and "<" not in caught.value.detail
    assert caught.value.detail == (
        "Not Found" if status == 404 else "the payops server failed: Bad Gateway (HTTP 502)"
    )


def test_the_apis_own_refusal_is_its_detail() -> None:
    with pytest.raises(ServerRefused) as caught:
        door(403, '{"detail": "approvers may not start runs"}', "application/json").call("POST", "/runs")
    assert (caught.value.status, caught.value.detail) == (403, "approvers may not start runs")
