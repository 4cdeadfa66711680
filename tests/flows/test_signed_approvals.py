"""The payout flow enforces the approval policy itself (tasks/approval/approval_gate.py,
tasks/approval/approvals.py).

The tiers come from the payops database, whatever the run's parameters say; the run waits for approvals
signed by the payops server's key over what the approvers were shown (its rows' fingerprint, totals per
currency, row count) from approvers other than whoever started it (or, started outside payops, whoever holds
Prefect's login); anything else sends nothing. A policy that cannot be read ends the run "Not approved"
before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from payops.deployments.approving import DecisionError
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.approvals import Approvals
from payops.tasks.approval.approvals import Subject, sign_approval, sign_start

from tests.flows.approval_support import (
    approval_policy,
    decide_as,
    key_pair,
    payops_db,
    prefect_login_holder,
    run_paused,
)
from tests.flows.support import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e

TOTAL = Decimal("34.50")  # three rows of payroll_rows


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    key_pair()  # in the session's payops home: the server's half signs here, the flows verify with the other
    return server


def _params(tmp_path: Path, slug: str, *, started_by: str | None = "olu", **fields) -> PayoutRunParams:
    sheet = write_sheet(tmp_path / f"{slug}.xlsx", payroll_rows(3, prefix=f"SG{abs(hash(slug)) % 10_000}"))
    start = sign_start(_key(), source=str(sheet), initiator=started_by, channel="cli") if started_by else ""
    return PayoutRunParams(
        source=str(sheet), label=f"signed-{slug}", report_dir=str(tmp_path / "r"), start=start, **fields
    )


def _key() -> Ed25519PrivateKey:
    """The payops server's signing key (the tests sign as the server does)."""
    return key_pair()[0]


def _payouts(server: SandboxServer) -> int:
    return emulator_stats(server.base_url)["payouts"]


def _run(params: PayoutRunParams, then) -> tuple[str, str, dict]:  # noqa: ANN001
    flow = payout_spreadsheet.with_options(flow_run_name=params.label)
    run_id, description, state = run_paused(lambda: flow(params, return_state=True), params.label, then)
    return run_id, description, run_summary(state).as_json()


def test_the_policy_in_the_database_sets_the_count_and_parameters_cannot_lower_it(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    """34.50 reaches the two-approver tier: the run asks for 2 although its parameters ask for none (no
    require_approval, a threshold far above); one approval and a resume keep it waiting; the second pays."""
    before = _payouts(env)
    params = _params(tmp_path, "policy", require_approval=False, approval_threshold="1000000.00")

    async def approve(run_id: str, description: str) -> None:
        from prefect.flow_runs import resume_flow_run

        from tests.flows.approval_support import paused_run

        assert "Needs **2 approvals** from approvers other than olu" in description
        assert "1 more approval needed" in await decide_as(run_id, "bea", comment="matches payroll")
        await resume_flow_run(run_id, run_input={"reject": False})  # the dialog unticked: not enough yet
        await paused_run(params.label)  # ... so it waits again
        assert _payouts(env) == before
        assert "continues" in await decide_as(run_id, "cat")

    with approval_policy("10:1, 30:2"):
        _, _, s = _run(params, approve)
    assert s["outcome"] == "completed" and s["approvals_required"] == 2
    assert s["approval"]["approvers"] == ["bea", "cat"] and s["started_by"] == "olu"
    assert s["approval"]["comment"] == "bea: matches payroll"
    assert _payouts(env) == before + 3


def _tampered(case: str, run_id: str, request) -> str:  # noqa: ANN001
    totals = {c: Decimal(f["amount"]) for c, f in request.totals.items()}
    good = Subject.of(run_id, request.fingerprint, totals, request.rows)
    return {
        "forged signature": sign_approval(Ed25519PrivateKey.generate(), good, "bea"),
        "another run": sign_approval(_key(), Subject.of("0" * 8, request.fingerprint, totals, 3), "bea"),
        "lower total": sign_approval(
            _key(), Subject.of(run_id, request.fingerprint, {"GHS": Decimal(1)}, 3), "bea"
        ),
        "other rows": sign_approval(_key(), Subject.of(run_id, "f" * 64, totals, 3), "bea"),
        "initiator approves": sign_approval(_key(), good, "olu"),
    }[case]


REASONS = {
    "forged signature": "an approval is not signed by this installation's approval key",
    "another run": "the approval by bea was signed for another run",
    "lower total": "the approval by bea was signed for GHS 1.00, this run pays GHS 34.50",
    "other rows": "the approval by bea was signed for other rows than this run sends",
    "initiator approves": "olu uploaded or started this run and cannot approve it",
}


@pytest.mark.parametrize("case", list(REASONS))
def test_a_resume_counts_only_valid_signed_approvals(
    prefect_harness, env: SandboxServer, tmp_path: Path, case: str
) -> None:
    """An approval written straight into the database (not through the console) is checked by the flow:
    a forged or mismatched one ends the run "Not approved", nothing sent."""
    before = _payouts(env)
    params = _params(tmp_path, case.replace(" ", "-"), require_approval=True)

    async def tamper(run_id: str, _description: str) -> None:
        from payops.store.approval_requests import ApprovalRequests
        from prefect.flow_runs import resume_flow_run

        with payops_db() as engine:
            request = ApprovalRequests(engine).get(run_id)
            Approvals(engine).decide(run_id, "mallory", "approve", "", _tampered(case, run_id, request))
        await resume_flow_run(run_id, run_input={"reject": False})

    _, _, s = _run(params, tamper)
    assert s["outcome"] == "not_approved" and _payouts(env) == before
    assert s["approval"]["approved"] is False
    assert s["approval"]["comment"] == f"approval refused: {REASONS[case]}"


def test_a_run_started_outside_payops_is_not_approved_by_a_holder_of_prefects_login(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    """No signed start (Prefect's UI or API, a schedule, an automation): ``hal`` holds Prefect's login and so
    could have started it. The server refuses hal's approval (403, audited), another approver's counts, and
    the policy's count applies unchanged."""
    from payops.store.audit import search

    before = _payouts(env)
    params = _params(tmp_path, "unsigned", started_by=None, require_approval=True)

    async def approve(run_id: str, description: str) -> None:
        assert "no payops initiator; holders of Prefect's login (hal) may not approve" in description
        assert "Needs **1 approval** from approvers other than hal" in description
        with pytest.raises(DecisionError) as refused:
            await decide_as(run_id, "hal")
        assert refused.value.status == 403
        assert refused.value.message == (
            "You hold Prefect's login and could have started this run outside payops; another approver must "
            "approve it."
        )
        with payops_db() as engine:
            [entry] = search(engine, action="payops.approval.refused", text=run_id)
            assert entry.actor == "hal" and "Prefect's login" in entry.detail
        assert "continues" in await decide_as(run_id, "bea")

    with prefect_login_holder("hal"):
        _, _, s = _run(params, approve)
    assert s["outcome"] == "completed" and s["approvals_required"] == 1
    assert s["approval"]["approvers"] == ["bea"] and "started_by" not in s
    assert _payouts(env) == before + 3


def test_the_flow_refuses_an_approval_by_a_holder_of_prefects_login_forced_into_the_database(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    """Even validly signed, hal's approval of a run started outside payops is refused by the flow itself."""
    before = _payouts(env)
    params = _params(tmp_path, "unsigned-forced", started_by=None, require_approval=True)

    async def force(run_id: str, _description: str) -> None:
        from payops.store.approval_requests import ApprovalRequests
        from prefect.flow_runs import resume_flow_run

        with payops_db() as engine:
            request = ApprovalRequests(engine).get(run_id)
            totals = {c: Decimal(f["amount"]) for c, f in request.totals.items()}
            subject = Subject.of(run_id, request.fingerprint, totals, request.rows)
            token = sign_approval(_key(), subject, "hal")
            Approvals(engine).decide(run_id, "hal", "approve", "", token)
        await resume_flow_run(run_id, run_input={"reject": False})

    with prefect_login_holder("hal"):
        _, _, s = _run(params, force)
    assert s["outcome"] == "not_approved" and _payouts(env) == before
    assert s["approval"]["comment"] == (
        "approval refused: hal holds Prefect's login (could have started this run outside payops) and cannot "
        "approve it"
    )


def test_a_start_signed_for_another_sheet_is_refused_before_pausing(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    before = _payouts(env)
    params = _params(tmp_path, "moved")
    params.start = sign_start(_key(), source="/elsewhere.xlsx", initiator="olu", channel="cli")
    s = run_summary(__import__("asyncio").run(payout_spreadsheet(params, return_state=True)))
    assert s.outcome == "not_approved" and "signed for another sheet" in s["approval"]["comment"]
    assert _payouts(env) == before


def test_a_policy_that_cannot_be_read_sends_nothing(
    prefect_harness, env: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payops database is unreachable: the run ends "Not approved" saying why (never the URL or its
    password), nothing is sent."""
    import asyncio

    monkeypatch.setenv("PAYOPS_DATABASE_URL", "postgresql+psycopg://payops:hunter2@127.0.0.1:9/payops")
    before = _payouts(env)
    state = asyncio.run(payout_spreadsheet(_params(tmp_path, "no-db"), return_state=True))
    s = run_summary(state)
    assert s.outcome == "not_approved" and _payouts(env) == before
    assert "the payops database could not be opened (OperationalError)" in s["approval"]["comment"]
    assert "hunter2" not in str(s.as_json()) and "hunter2" not in (state.message or "")


def test_a_database_behind_this_payops_sends_nothing(
    prefect_harness, env: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A payops database an earlier payops left behind: the flow does not migrate it (only `payops serve`
    and `payops db upgrade` do), the run ends "Not approved" naming the database and the command, nothing
    is sent, and the database is left as it was."""
    import asyncio

    from payops.store.database import open_engine, recorded_revisions

    from tests.store.test_database import _behind

    url = f"sqlite:///{tmp_path / 'behind.sqlite3'}"
    _behind(url)
    monkeypatch.setenv("PAYOPS_DATABASE_URL", url)
    before = _payouts(env)
    state = asyncio.run(payout_spreadsheet(_params(tmp_path, "behind"), return_state=True))
    s = run_summary(state)
    assert s.outcome == "not_approved" and _payouts(env) == before
    comment = s["approval"]["comment"]
    assert f"the payops database {url} is at revision 0003_lookup_cache" in comment
    assert "run `payops db upgrade`" in comment
    engine = open_engine(url)
    try:
        assert recorded_revisions(engine) == {"0003_lookup_cache"}
    finally:
        engine.dispose()
