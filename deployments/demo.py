"""`make demo`: the main job on the embedded default.

Starts the emulator (`payops sandbox`) on a free 127.0.0.1 port, pays examples/payouts-demo.xlsx with the
payout flow on a Prefect server (``payops serve``'s when it answers, else a temporary one this process owns),
waits until every payout is final, writes the reports, prints a short summary and stops the emulator. The
emulator and the temporary server die with this process, also when it is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from payops.deployments.processes import ROOT, free_port, read_env_file, start_sandbox
from payops.tasks.runtime.run_outcomes import Outcome

SHEET = ROOT / "examples" / "payouts-demo.xlsx"
DEMO_HOME = ROOT / ".payops-demo"
DEMO_OPERATOR = "payops-demo"


def unattended_home(home: Path, policy: str = "none", operator: str | None = DEMO_OPERATOR) -> dict[str, str]:
    """A payops home for runs nobody attends (the demo, benchmarks, tests): its approval policy stated
    explicitly (a new install's default asks one approver for every run) and, unless ``operator`` is None, an
    operator with a fresh personal API token. Returns the environment that selects it (PAYOPS_HOME and
    PAYOPS_API_TOKEN). Never the home `payops serve` uses: "none" there would turn its approvals off."""
    import secrets

    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.users import UserError, Users

    # This home's own SQLite file, whatever PAYOPS_DATABASE_URL says; upgraded, as serve would: the home is
    # the caller's own (an earlier checkout's demo home may be behind).
    settings = PayopsSettings(home=home, database_url=f"sqlite:///{home.expanduser() / 'payops.sqlite3'}")
    settings.home_dir()  # made (mode 0700) before its database file
    engine = upgrade_database(settings)
    state_policy(engine, policy)
    env = {"PAYOPS_HOME": str(home)}
    if operator:
        users = Users(engine)
        try:
            users.add(operator, "operator", secrets.token_urlsafe(18))
        except UserError:  # made by an earlier run: only its token is new
            pass
        env["PAYOPS_API_TOKEN"] = users.issue_token(operator, "unattended")
    return env


def main() -> int:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect-home"))
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The demo's own payops home: nobody else's lookup cache, users or policy, and its policy stated.
    os.environ.update(unattended_home(DEMO_HOME, operator=None))
    print(
        f"payops home: {DEMO_HOME.relative_to(ROOT)} (approval policy: none, stated for the demo)", flush=True
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "sandbox.env"
        print(f"starting the Payments Service emulator on 127.0.0.1:{port} ...", flush=True)
        proc = start_sandbox(port, env_file)
        try:
            os.environ.update(read_env_file(env_file))
            from payops.deployments.cli._common import run_on_server
            from payops.flows.outcomes import run_summary
            from payops.flows.payouts import PayoutRunParams, payout_spreadsheet

            print(f"paying {SHEET.relative_to(ROOT)} ...", flush=True)
            # The reports go to the demo's home, beside its database: .payops-demo/reports (README).
            reports = DEMO_HOME / "reports"
            params = PayoutRunParams(source=str(SHEET), report_dir=str(reports), poll_deadline_s=240)
            summary = run_summary(run_on_server(lambda: payout_spreadsheet(params, return_state=True)))
            print(summary.text())
            not_final = summary.not_final
            if summary.outcome != Outcome.COMPLETED or not_final:
                print(f"demo incomplete: outcome {summary.outcome}, {len(not_final)} payouts not final")
                return 1
            return 0
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
