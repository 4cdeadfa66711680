"""Spec § Settlement run table, settlement policy, settle now, list/latest/get, resettlements."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest

POLICY = {
    "schedule": "manual",
    "currency": "GHS",
    "minimumBalance": "9000000.00",
    "destinations": [
        {
            "type": "bank",
            "provider": "calbank",
            "accountNumber": "1400000000001",
            "accountName": "Demo",
            "share": "60",
        },
        {"type": "mobile_money", "provider": "mtn", "accountNumber": "233240009991", "share": "40"},
    ],
}


def policy(**over) -> dict:
    return {**POLICY, **over}


def dest(account: str, share: str = "100", provider: str = "calbank", type_: str = "bank") -> dict:
    return {"type": type_, "provider": provider, "accountNumber": account, "share": share}


async def test_demo_has_a_verified_policy(api) -> None:
    body = (await api.get("/v1/settlement-policy")).json()
    assert body["currency"] == "GHS" and body["schedule"] == "manual" and body["updatedAt"]
    assert sum(Decimal(d["share"]) for d in body["destinations"]) == 100


async def test_put_get_delete_policy(api) -> None:
    r = await api.put("/v1/settlement-policy", POLICY)
    assert r.status_code == 200
    assert r.json() == {**POLICY, "updatedAt": "2025-03-12T10:00:00.000Z"}
    assert (await api.get("/v1/settlement-policy")).json() == r.json()
    assert (await api.delete("/v1/settlement-policy")).status_code == 204
    assert (await api.get("/v1/settlement-policy")).status_code == 404
    r = await api.post("/v1/settlements", {"reference": "after-delete"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "policy_not_nettable"


@pytest.mark.parametrize(
    ("body", "status", "code", "text"),
    [
        (policy(destinations=[dest("1400000009992")]), 422, "destination_not_verified", "1400000009992"),
        (
            policy(destinations=[dest("1400000009993")]),
            503,
            "destination_verification_unavailable",
            "internal server error",
        ),
        (policy(destinations=[dest("1", "50"), dest("2", "40")]), 400, "invalid_input", "destinations"),
        (
            policy(destinations=[dest("14000001", provider="mtn")]),
            400,
            "invalid_input",
            "destinations[0].provider",
        ),
        (policy(schedule="hourly"), 400, "invalid_input", "schedule"),
        (policy(minimumBalance=5), 400, "invalid_input", "minimumBalance"),
        (policy(destinations=[]), 400, "invalid_input", "destinations"),
    ],
)
async def test_policy_refusals_change_nothing(api, body, status, code, text) -> None:
    before = (await api.get("/v1/settlement-policy")).json()
    r = await api.put("/v1/settlement-policy", body)
    assert r.status_code == status and r.json()["error"]["code"] == code
    assert text in r.json()["error"]["message"]
    assert (await api.get("/v1/settlement-policy")).json() == before


async def test_settle_now_runs_then_completes(api, clock, demo) -> None:
    await api.put("/v1/settlement-policy", policy(destinations=[dest("1400000000001")]))
    r = await api.post("/v1/settlements", {"reference": "now-1", "currency": "GHS"})
    assert r.status_code == 202
    run = r.json()
    assert run["status"] == "running" and "outcome" not in run and "completedAt" not in run
    assert run["total"] == "1000000.00" and run["itemCount"] == 1
    uuid.UUID(run["id"])
    wallet = (await api.get("/v1/wallet")).json()["items"][0]
    assert wallet["balances"]["GHS"] == "9000000.00" and wallet["reserved"]["GHS"] == "1000000.00"
    clock.advance(2)
    done = (await api.get(f"/v1/settlements/{run['id']}")).json()
    assert done["status"] == "completed" and done["outcome"] == "settled"
    assert done["completedAt"] == "2025-03-12T10:00:02.000Z"
    assert (await api.get("/v1/wallet")).json()["items"][0]["reserved"]["GHS"] == "0.00"
    assert [e.data["status"] for e in demo.events if e.type == "settlement.status_changed"] == [
        "running",
        "completed",
    ]
    assert all("id" not in e.data for e in demo.events)
    assert demo.wallet.balanced()


async def _failed_run(api, clock, outcome: str) -> dict:
    dests = [dest("1400000000001", "60"), dest("233240009991", "40", "mtn", "mobile_money")]
    if outcome == "failed_all":
        dests = [dest("1400000009991")]
    await api.put("/v1/settlement-policy", policy(destinations=dests))
    run = (await api.post("/v1/settlements", {"reference": f"run-{outcome}"})).json()
    clock.advance(2)
    run = (await api.get(f"/v1/settlements/{run['id']}")).json()
    assert run["outcome"] == outcome
    return run


async def test_failed_partial_and_resettlement(api, clock, demo) -> None:
    run = await _failed_run(api, clock, "failed_partial")
    assert run["total"] == "600000.00"  # settled part only
    wallet = (await api.get("/v1/wallet")).json()["items"][0]
    assert wallet["balances"]["GHS"] == "9400000.00"  # failed 400,000 came back
    await api.put("/v1/settlement-policy", policy(destinations=[dest("1400000000001")]))
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "retry-1"})
    assert r.status_code == 202
    retry = r.json()
    assert retry["id"] != run["id"] and retry["total"] == "400000.00" and retry["status"] == "running"
    clock.advance(2)
    assert (await api.get(f"/v1/settlements/{retry['id']}")).json()["outcome"] == "settled"
    assert (await api.get(f"/v1/settlements/{run['id']}")).json() == run  # original kept
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "retry-2"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "settlement_already_retried"
    r = await api.post(f"/v1/settlements/{retry['id']}/resettlements", {"reference": "retry-3"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "resettlement_not_allowed"
    assert demo.wallet.balanced()


async def test_failed_all_can_be_retried(api, clock) -> None:
    run = await _failed_run(api, clock, "failed_all")
    assert run["total"] == "0.00"
    await api.put("/v1/settlement-policy", policy(destinations=[dest("1400000000001")]))
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "retry-all"})
    assert r.status_code == 202 and r.json()["total"] == "1000000.00"


async def test_running_run_cannot_be_retried(api) -> None:
    run = (await api.post("/v1/settlements", {"reference": "still-running"})).json()
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "too-early"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "resettlement_not_allowed"


async def test_resettlement_422_when_setup_cannot_pay(api, clock, client) -> None:
    run = await _failed_run(api, clock, "failed_partial")
    await client.patch("/_sandbox/businesses/demo/test", json={"providers": ["mtn", "telecel"]})
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "r-missing"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "policy_missing_provider"
    await client.patch(
        "/_sandbox/businesses/demo/test", json={"providers": ["mtn", "calbank"], "settlementNettable": False}
    )
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "r-netting"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "policy_not_nettable"
    await client.patch("/_sandbox/businesses/demo/test", json={"settlementNettable": True})
    r = await api.post(f"/v1/settlements/{run['id']}/resettlements", {"reference": "r-ok"})
    assert r.status_code == 202


async def test_resettlement_path_and_body_validation(api) -> None:
    r = await api.post("/v1/settlements/not-a-uuid/resettlements", {"reference": "x"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("id")
    r = await api.post(f"/v1/settlements/{uuid.uuid4()}/resettlements", {"reference": "bad ref"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("reference")
    r = await api.post(f"/v1/settlements/{uuid.uuid4()}/resettlements", {"reference": "ok"})
    assert r.status_code == 404
    run = (await api.post("/v1/settlements", {"reference": "upper"})).json()
    assert (await api.get(f"/v1/settlements/{run['id'].upper()}")).status_code == 200


async def test_settlement_reference_is_unique(api) -> None:
    first = await api.post("/v1/settlements", {"reference": "once"})
    assert (await api.post("/v1/settlements", {"reference": "once"})).content == first.content
    r = await api.post("/v1/settlements", {"reference": "once", "currency": "GHS"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_reference"


async def test_list_latest_and_paging(api, clock) -> None:
    assert (await api.get("/v1/settlements/latest")).status_code == 404
    assert (await api.get("/v1/settlements")).json() == {"items": []}
    ids = []
    for i in range(5):
        ids.append((await api.post("/v1/settlements", {"reference": f"list-{i}"})).json()["id"])
        clock.advance(3)
    assert (await api.get("/v1/settlements/latest")).json()["id"] == ids[-1]
    page1 = (await api.get("/v1/settlements", limit=2)).json()
    page2 = (await api.get("/v1/settlements", limit=2, cursor=page1["nextCursor"])).json()
    page3 = (await api.get("/v1/settlements", limit=2, cursor=page2["nextCursor"])).json()
    assert [r["id"] for r in page1["items"] + page2["items"] + page3["items"]] == ids[::-1]
    assert "nextCursor" not in page3
    for bad in (0, 51):
        assert (await api.get("/v1/settlements", limit=bad)).status_code == 400


async def test_scheduled_daily_runs(api, clock, client) -> None:
    await api.put("/v1/settlement-policy", policy(schedule="daily", destinations=[dest("1400000000001")]))
    clock.set(datetime(2025, 3, 12, 23, 59, 59, tzinfo=UTC))
    await api.login()
    assert (await api.get("/v1/settlements")).json()["items"] == []
    clock.advance(1)  # Accra midnight
    runs = (await api.get("/v1/settlements")).json()["items"]
    assert len(runs) == 1 and runs[0]["startedAt"] == "2025-03-13T00:00:00.000Z"
    assert runs[0]["reference"].startswith("stl-20250313-")
    clock.set(datetime(2025, 3, 15, 12, 0, tzinfo=UTC))
    await api.login()
    assert len((await api.get("/v1/settlements")).json()["items"]) == 3
    r = await client.post("/_sandbox/businesses/demo/test/settlements/run")
    assert r.status_code == 202 and r.json()["status"] == "running"
    assert len((await api.get("/v1/settlements")).json()["items"]) == 4
