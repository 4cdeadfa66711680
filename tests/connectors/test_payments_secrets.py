"""No client secret and no access token in logs, exception texts or reprs during failing calls."""

from __future__ import annotations

import logging
import traceback

import httpx
import pytest
from payops.connectors.payments import PaymentsClient, PaymentsError, PaymentsSettings

from tests.connectors.conftest import CLIENT_SECRET, FakeService, FixedRandom, error_response

ACCESS_TOKEN = "eyJhbGciOiJIUzI1NiJ9.very-secret-access-token.sig"


def _texts(exc: BaseException) -> list[str]:
    out = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    out += [str(a) for a in exc.args]
    return out


@pytest.mark.parametrize(
    "api_answer",
    [
        lambda r: error_response(500, "internal", "internal server error"),
        lambda r: error_response(401, "unauthenticated", "token expired"),
        lambda r: error_response(429, "rate_limited", headers={"Retry-After": "1"}),
        lambda r: error_response(403, "forbidden"),
        lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("timed out")),
        lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")),
        lambda r: httpx.Response(200, json={"unexpected": True}),
    ],
)
async def test_failing_calls_leak_no_secret_or_token(api_answer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx included

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/oauth/token"):
            return httpx.Response(
                200, json={"access_token": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 300}
            )
        assert request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"
        return api_answer(request)

    settings = PaymentsSettings(
        base_url="http://payments.test", client_id="client-1", client_secret=CLIENT_SECRET, max_retries=2
    )

    async def no_sleep(_: float) -> None:
        return None

    texts: list[str] = [repr(settings), str(settings), str(settings.model_dump())]
    async with PaymentsClient(
        settings, transport=httpx.MockTransport(handler), sleep=no_sleep, rng=FixedRandom()
    ) as client:
        texts.append(repr(client))
        with pytest.raises(PaymentsError) as info:
            await client.wallet.get()
        texts.append(repr(client._auth._token))
        texts.extend(_texts(info.value))
    texts.append(caplog.text)
    texts.extend(r.getMessage() for r in caplog.records)
    assert caplog.records, "the failing call should have been logged"
    for text in texts:
        assert CLIENT_SECRET not in text
        assert ACCESS_TOKEN not in text
        assert "very-secret-access-token" not in text


async def test_token_endpoint_failure_leaks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    service = FakeService(lambda r: httpx.Response(200), token_status=401)
    settings = PaymentsSettings(base_url="http://payments.test", client_id="c", client_secret=CLIENT_SECRET)
    async with PaymentsClient(settings, transport=service.transport()) as client:
        with pytest.raises(PaymentsError) as info:
            await client.limits.get()
    for text in [*_texts(info.value), caplog.text]:
        assert CLIENT_SECRET not in text


def test_settings_repr_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_BASE_URL", "http://h:1/")
    monkeypatch.setenv("PAYOPS_CLIENT_ID", "env-client")
    monkeypatch.setenv("PAYOPS_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("PAYOPS_MAX_RETRIES", "2")
    settings = PaymentsSettings()  # type: ignore[call-arg]
    assert (
        settings.base_url == "http://h:1" and settings.client_id == "env-client" and settings.max_retries == 2
    )
    assert settings.token_url == "http://h:1/auth/v1/oauth/token"
    assert settings.client_secret.get_secret_value() == CLIENT_SECRET
    assert CLIENT_SECRET not in repr(settings) and CLIENT_SECRET not in settings.model_dump_json()
