"""The console's webhook receiver: signed deliveries become Prefect events exactly once.

Signatures are computed here independently of the connector, from the spec: ``v1,`` + base64 of
HMAC-SHA256(secret as issued, ``{id}.{timestamp}.{raw body}``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from payops.deployments.console import ConsoleSettings, LocalLauncher, create_app

OLD, NEW = "whsec-old-secret-issued", "new-secret-as-issued-2"


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def delivery(
    event_id: str,
    *,
    secret: str = NEW,
    age_s: int = 0,
    event_type: str = "settlement.status_changed",
    data: dict[str, Any] | None = None,
    created_at: str = "2025-01-02T03:04:05Z",
) -> tuple[bytes, dict[str, str]]:
    data = (
        data
        if data is not None
        else {"reference": "SET-1", "status": "completed", "outcome": "failed_partial"}
    )
    body = json.dumps({"id": event_id, "type": event_type, "createdAt": created_at, "data": data}).encode()
    ts = int(time.time()) - age_s
    headers = {
        "Webhook-Id": event_id,
        "Webhook-Timestamp": str(ts),
        "Webhook-Signature": sign(secret, event_id, ts, body),
        "Content-Type": "application/json",
    }
    return body, headers


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail_next = False

    def __call__(self, **kwargs: Any) -> None:
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("events API down")
        self.events.append(kwargs)


def settings_for(tmp_path: Path, secrets: str | None = f"{OLD},{NEW}", **extra: Any) -> ConsoleSettings:
    fields: dict[str, Any] = {
        "webhook_secrets": secrets,
        "database_url": f"sqlite:///{tmp_path / 'payops.sqlite3'}",
        "upload_url": str(tmp_path / "up"),
        "report_url": str(tmp_path / "rep"),
    }
    return ConsoleSettings(**{**fields, **extra})


def make_client(
    tmp_path: Path, recorder: Recorder, secrets: str | None = f"{OLD},{NEW}", **extra: Any
) -> TestClient:
    """The console app; use it in a ``with`` block so that its relay runs."""
    return TestClient(
        create_app(settings_for(tmp_path, secrets, **extra), launcher=LocalLauncher(), emitter=recorder)
    )


def wait_for(predicate: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def test_valid_delivery_emits_one_prefect_event(tmp_path: Path, recorder: Recorder) -> None:
    with make_client(tmp_path, recorder) as client:
        body, headers = delivery("evt_0001")
        r = client.post("/webhooks/payments", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "accepted"
        wait_for(lambda: len(recorder.events) == 1)
    e = recorder.events[0]
    assert e["event"] == "payments.settlement.status_changed"
    assert e["resource"]["prefect.resource.id"] == "payments.settlement.SET-1"
    assert e["resource"]["payments.outcome"] == "failed_partial"
    assert e["resource"]["payments.status"] == "completed"
    assert {"reference": "SET-1", "status": "completed", "outcome": "failed_partial"}.items() <= e[
        "payload"
    ].items()
    assert isinstance(e["id"], uuid.UUID)


def test_old_secret_still_verifies_during_rotation(tmp_path: Path, recorder: Recorder) -> None:
    with make_client(tmp_path, recorder) as client:
        body, headers = delivery(
            "evt_0002",
            secret=OLD,
            event_type="payout.status_changed",
            data={"reference": "PAY-9", "status": "failed"},
        )
        assert client.post("/webhooks/payments", content=body, headers=headers).status_code == 200
        wait_for(lambda: len(recorder.events) == 1)
    assert [e["resource"]["prefect.resource.id"] for e in recorder.events] == ["payments.payout.PAY-9"]


@pytest.mark.parametrize("case", ["tampered", "stale", "future", "wrong-secret", "unsigned", "id-mismatch"])
def test_bad_deliveries_get_400_and_emit_nothing(tmp_path: Path, recorder: Recorder, case: str) -> None:
    with make_client(tmp_path, recorder) as client:
        body, headers = delivery(
            "evt_bad",
            age_s={"stale": 600, "future": -600}.get(case, 0),
            secret="someone-else" if case == "wrong-secret" else NEW,
        )
        if case == "tampered":
            body = body.replace(b"failed_partial", b"settled")
        if case == "unsigned":
            del headers["Webhook-Signature"]
        if case == "id-mismatch":
            headers["Webhook-Id"] = "evt_other"
            ts = headers["Webhook-Timestamp"]
            headers["Webhook-Signature"] = sign(NEW, "evt_other", int(ts), body)
        r = client.post("/webhooks/payments", content=body, headers=headers)
        assert r.status_code == 400
        assert recorder.events == []
        # A refused delivery is not remembered: the genuine one is still processed.
        body, headers = delivery("evt_bad")
        assert client.post("/webhooks/payments", content=body, headers=headers).json()["status"] == "accepted"
        wait_for(lambda: len(recorder.events) == 1)


def test_duplicate_is_acknowledged_and_skipped_even_after_a_restart(
    tmp_path: Path, recorder: Recorder
) -> None:
    with make_client(tmp_path, recorder) as client:
        body, headers = delivery("evt_dup")
        assert client.post("/webhooks/payments", content=body, headers=headers).json()["status"] == "accepted"
        body, headers = delivery("evt_dup")  # a retry: same id, fresh timestamp and signature
        r = client.post("/webhooks/payments", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "duplicate"
        wait_for(lambda: len(recorder.events) == 1)
    with make_client(tmp_path, recorder) as restarted:
        r = restarted.post("/webhooks/payments", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "duplicate"
        time.sleep(0.3)
    assert len(recorder.events) == 1


def test_failed_forward_is_kept_retried_and_arrives_once(tmp_path: Path, recorder: Recorder) -> None:
    """Prefect refusing the event no longer costs the delivery: it is accepted, kept and retried."""
    recorder.fail_next = True
    with make_client(tmp_path, recorder) as client:
        body, headers = delivery("evt_retry")
        r = client.post("/webhooks/payments", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "accepted"
        # the service's own retry of the same id is a duplicate: the inbox already keeps it
        assert (
            client.post("/webhooks/payments", content=body, headers=headers).json()["status"] == "duplicate"
        )
        wait_for(lambda: len(recorder.events) == 1)  # after the relay's 1 s backoff
        time.sleep(0.3)
    assert len(recorder.events) == 1


def test_unconfigured_receiver_answers_503(tmp_path: Path, recorder: Recorder) -> None:
    with make_client(tmp_path, recorder, secrets=None) as client:
        body, headers = delivery("evt_x")
        assert client.post("/webhooks/payments", content=body, headers=headers).status_code == 503
    assert recorder.events == []


def test_event_ids_are_stable_per_webhook_id(tmp_path: Path) -> None:
    from payops.connectors.payments.models import WebhookEnvelope
    from payops.deployments.console import prefect_event

    env = WebhookEnvelope.model_validate(
        {"id": "evt_7", "type": "settlement.status_changed", "data": {"reference": "S-7"}}
    )
    assert prefect_event(env)["id"] == prefect_event(env)["id"]
    assert "payments.outcome" not in prefect_event(env)["resource"]
