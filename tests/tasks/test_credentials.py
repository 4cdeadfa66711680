"""PaymentsCredentials block and load_settings (the block the run names, else the worker's
PAYOPS_CREDENTIALS_BLOCK, else PAYOPS_* env vars)."""

from __future__ import annotations

import pytest
from payops.connectors.payments import PaymentsSettings
from payops.store.settings import PayopsSettings
from payops.tasks.runtime.credentials import PaymentsCredentials, load_settings

SECRET = "block-secret-value-42"


def make_block() -> PaymentsCredentials:
    return PaymentsCredentials(
        base_url="http://sandbox.test:9000/",
        client_id="demo-test-client",
        client_secret=SECRET,
        resource="urn:payments-api",
    )


def test_block_masks_secret_and_builds_settings() -> None:
    block = make_block()
    assert SECRET not in repr(block) and SECRET not in str(block)
    settings = block.to_settings(max_retries=1)
    assert isinstance(settings, PaymentsSettings)
    assert settings.base_url == "http://sandbox.test:9000"
    assert settings.token_url == "http://sandbox.test:9000/auth/v1/oauth/token"
    assert settings.client_secret.get_secret_value() == SECRET and settings.max_retries == 1
    assert SECRET not in repr(settings)


def test_load_settings_from_env_when_no_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_BASE_URL", "http://env-host:1")
    monkeypatch.setenv("PAYOPS_AUTH_URL", "http://env-host:2/auth")
    monkeypatch.setenv("PAYOPS_CLIENT_ID", "env-client")
    monkeypatch.setenv("PAYOPS_CLIENT_SECRET", "env-secret")
    settings = load_settings(None)
    assert (settings.base_url, settings.client_id) == ("http://env-host:1", "env-client")
    assert settings.token_url == "http://env-host:2/auth/v1/oauth/token"
    assert settings.client_secret.get_secret_value() == "env-secret"


def test_missing_env_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PAYOPS_CLIENT_ID", "PAYOPS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError):
        load_settings(None)


def test_saved_block_round_trip(prefect_harness: None) -> None:
    make_block().save("payops-test-creds", overwrite=True)
    settings = load_settings("payops-test-creds")
    assert settings.client_id == "demo-test-client"
    assert settings.client_secret.get_secret_value() == SECRET
    assert settings.base_url == "http://sandbox.test:9000"


async def test_saved_block_loads_from_async_code(prefect_harness: None) -> None:
    await make_block().save("payops-test-creds-async", overwrite=True)
    from_sync_helper = load_settings("payops-test-creds-async")  # works inside a running event loop
    assert from_sync_helper.client_id == "demo-test-client"
    assert from_sync_helper.client_secret.get_secret_value() == SECRET


def test_a_run_naming_no_block_reads_the_workers_block(
    prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment run started with only its sheet and label (Prefect replaced the deployment's whole
    `params`, its `credentials_block` with it) reads the block the worker names (PAYOPS_CREDENTIALS_BLOCK);
    a block the run names wins over it."""
    for name in ("PAYOPS_CLIENT_ID", "PAYOPS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    make_block().save("payops-worker-creds", overwrite=True)
    other = make_block()
    other.client_id = "named-by-the-run"
    other.save("payops-run-creds", overwrite=True)
    monkeypatch.setenv("PAYOPS_CREDENTIALS_BLOCK", "payops-worker-creds")
    worker = PayopsSettings.from_env()
    assert load_settings("", worker).client_id == "demo-test-client"
    assert load_settings("payops-run-creds", worker).client_id == "named-by-the-run"
    with pytest.raises(ValueError):  # no worker block, no env credential: refused, naming what to set
        load_settings("", PayopsSettings(credentials_block=None))


async def test_stored_secret_is_masked_in_the_api(prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client

    await make_block().save("payops-test-creds-masked", overwrite=True)
    async with get_client() as client:
        doc = await client.read_block_document_by_name(
            "payops-test-creds-masked", block_type_slug="payments-credentials", include_secrets=False
        )
    assert doc.data["client_id"] == "demo-test-client"
    assert SECRET not in str(doc.data)
