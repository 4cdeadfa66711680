"""The deployments of ``deployments/prefect.yaml`` as Python objects, and ``payops serve`` (local all-in-one).

``prefect.yaml`` is the one list of deployments: ``prefect deploy`` reads it for work pools, and
``payops serve`` reads it here and serves every deployment (schedules and triggers included) from one process.

The all-in-one starts, as child processes in their own process groups: a Prefect server behind a login
(unless ``PREFECT_API_URL`` is configured; `deployments.prefect_login`), the emulator with ``--sandbox``, and
the console; then it serves the deployments in this process. Ctrl-C, SIGINT or SIGTERM stops the runner and
every child within ``SHUTDOWN_S`` seconds; children also receive SIGTERM if this process dies
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml
from payops.deployments.processes import (
    ROOT,
    StopRequested,
    Supervisor,
    exit_by_deadline,
    free_port,
    kill_descendants,
    port_free,
    prefect_server_command,
    prefect_server_env,
    read_env_file,
    sandbox_command,
    stop_on_signals,
    wait_http,
)

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

PREFECT_YAML = Path(__file__).with_name("prefect.yaml")
PAYOUT_DEPLOYMENT = "payout-spreadsheet/payout-spreadsheet"
HEARTBEAT_S = "30"
"""Seconds between a flow run's heartbeats (prefect.yaml's job variables say the same for workers)."""


# -- prefect.yaml ------------------------------------------------------------------------------------------
WORKERS_ONLY = frozenset({"approval-deadlines"})
"""Deployments of prefect.yaml that `payops serve` leaves out: the approval-deadlines sweep resumes runs
suspended on workers (PAYOPS_APPROVAL_WAIT=suspend, the pool's job variables); serve's runs wait for approval
in their own process and remind and expire by themselves."""


def load_specs(path: Path = PREFECT_YAML) -> list[dict[str, Any]]:
    """The ``deployments`` entries of a prefect.yaml (YAML anchors resolved)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(document.get("deployments") or [])


def served_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The specs `payops serve` serves: all but `WORKERS_ONLY`."""
    return [s for s in specs if s["name"] not in WORKERS_ONLY]


async def resolve_templates(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Resolve ``{{ prefect.blocks.* }}``, ``{{ prefect.variables.* }}`` and ``{{ $ENV }}`` as
    ``prefect deploy`` does; event templates (``{{ event... | string }}``) are left for the automation."""
    from prefect.utilities.templating import (
        apply_values,
        resolve_block_document_references,
        resolve_variables,
    )

    resolved = await resolve_block_document_references(specs)
    resolved = await resolve_variables(resolved)
    return apply_values(resolved, os.environ, remove_notset=False)


def schedules_of(spec: Mapping[str, Any]) -> list[Any]:
    """Prefect schedule objects for the ``cron`` / ``interval`` entries of a deployment."""
    from prefect.schedules import Cron, Interval

    out = []
    for item in spec.get("schedules") or []:
        if "cron" in item:
            out.append(Cron(item["cron"], timezone=item.get("timezone"), active=item.get("active", True)))
        elif "interval" in item:
            out.append(
                Interval(
                    timedelta(seconds=float(item["interval"])),
                    timezone=item.get("timezone"),
                    active=item.get("active", True),
                )
            )
        else:
            raise ValueError(f"deployment {spec.get('name')!r}: only cron and interval schedules supported")
    return out


def concurrency_of(spec: Mapping[str, Any]) -> Any:
    """The deployment's ``concurrency_limit`` (a number, or limit and collision strategy) as Prefect takes it;
    None: no limit."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig

    found = spec.get("concurrency_limit")
    return ConcurrencyLimitConfig.model_validate(found) if isinstance(found, Mapping) else found


def triggers_of(spec: Mapping[str, Any]) -> list[Any]:
    """Validated deployment triggers (as ``prefect deploy`` builds them)."""
    from prefect.events.schemas.deployment_triggers import DeploymentTriggerTypes
    from pydantic import TypeAdapter

    adapter = TypeAdapter(DeploymentTriggerTypes)
    triggers = []
    for i, raw in enumerate(spec.get("triggers") or [], start=1):
        raw = {"name": f"{spec['name']}__automation_{i}", **raw}
        triggers.append(adapter.validate_python(raw))
    return triggers


def runner_deployments(specs: list[dict[str, Any]]) -> list[Any]:
    """``flow.to_deployment(...)`` for every spec (its entrypoint a module of the installed payops)."""
    from prefect.flows import load_flow_from_entrypoint

    deployments = []
    for spec in specs:
        flow = load_flow_from_entrypoint(spec["entrypoint"], use_placeholder_flow=False)
        deployments.append(
            flow.to_deployment(
                name=spec["name"],
                description=spec.get("description"),
                tags=spec.get("tags"),
                parameters=spec.get("parameters") or {},
                schedules=schedules_of(spec),
                triggers=triggers_of(spec),
                concurrency_limit=concurrency_of(spec),
            )
        )
    return deployments


def _api_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def approval_key(settings: PayopsSettings) -> str | None:
    """Make sure runs can be signed and verified: unless ``PAYOPS_APPROVAL_SIGNING_KEY_FILE`` names the
    server's private key, keep an Ed25519 key pair in the payops home (made once), which the console (signs)
    and the flows served here (verify) find there; no key goes into the environment. Returns the public
    half's file for the record (None: configured elsewhere)."""
    from payops.tasks.approval.approval_keys import VERIFY_KEY_FILE, ensure_key_pair

    if settings.approval_signing_key_file is not None:
        return str(settings.approval_verify_key_file) if settings.approval_verify_key_file else None
    home = settings.home_dir()
    ensure_key_pair(home)
    return str(home / VERIFY_KEY_FILE)


FIRST_ADMIN = "admin"


def ensure_first_admin(settings: PayopsSettings, say: Callable[[str], None] = print) -> Path | None:
    """Bring the payops database to the newest revision (serve is one of the two entry points that migrate);
    say the approval policy in force; on a database without an enabled admin: create ``admin`` with a random
    password written to a 0600 file under the home; returns the file (never the password itself)."""
    from payops.store import upgrade_database
    from payops.store.approvals import Approvals
    from payops.store.home import host_actor
    from payops.store.users import Users
    from payops.tasks.events.auditing import Auditor

    home = settings.home_dir()
    engine = upgrade_database(settings)
    policy = Approvals(engine).policy()
    say(f"approval policy: {policy.describe()} (console: Approval policy; CLI: payops approvals policy)")
    users = Users(engine)
    if any(u.role == "admin" and not u.disabled for u in users.all()):
        return None
    path = home / "first-admin-password"
    password = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(password + "\n")
    users.add(FIRST_ADMIN, "admin", password)
    auditor = Auditor(engine, lambda **event: None, key=settings.audit_key_bytes())
    auditor.record(host_actor(), "user.added", f"user:{FIRST_ADMIN}", "host", by="payops serve")
    say(
        f"first admin created: user {FIRST_ADMIN!r}, password in {path} (mode 0600); "
        "reset it on the console's Users page"
    )
    return path


def apply_alerts(settings: PayopsSettings, console: str, say: Callable[[str], None]) -> bool:
    """Apply the alert automations when ``PAYOPS_ALERTS_BLOCK`` names a notification block (operations.md),
    their links to ``console``. A wrong block is reported and the rest of the all-in-one still starts: alerts
    are not worth an outage."""
    from payops.deployments.alerts import AlertSetupError, apply_automations, apply_recovery

    block = settings.alerts_block
    if not block:
        try:  # a run whose process is gone is restarted, alerts or not
            recovered = asyncio.run(apply_recovery())
        except (AlertSetupError, httpx.HTTPError) as exc:
            say(f"recovery automations: not applied: {exc}")
        else:
            say(f"recovery automations: {len(recovered)} (crashed payout runs restart by themselves)")
        say("alerts: off (set PAYOPS_ALERTS_BLOCK to a notification block to turn them on)")
        return False
    try:
        done = asyncio.run(apply_automations(block, settings, console=console))
    except (AlertSetupError, httpx.HTTPError) as exc:
        say(f"alerts: not applied: {exc}")
        return False
    say(f"alerts: {len(done)} automations notify through {block}")
    return True


WEBHOOK_PATH = "/webhooks/payments"


def wire_webhooks(
    sandbox_url: str, receiver_url: str, console_env: MutableMapping[str, str], say: Callable[[str], None]
) -> None:
    """Register the console's receiver with the emulator for the types the forward filter selects, and give
    the console that endpoint's signing secret (first in ``PAYOPS_WEBHOOK_SECRETS``; configured ones kept)."""
    from payops.deployments.webhook_endpoint import ensure_endpoint, subscribed_types
    from payops.tasks.events.payment_events import DEFAULT_FORWARD

    types = subscribed_types(console_env.get("PAYOPS_WEBHOOK_FORWARD") or DEFAULT_FORWARD)
    try:
        endpoint = ensure_endpoint(sandbox_url, receiver_url, types)
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise RuntimeError(f"could not register the webhook endpoint with the emulator: {exc}") from None
    configured = console_env.get("PAYOPS_WEBHOOK_SECRETS", "")
    console_env["PAYOPS_WEBHOOK_SECRETS"] = ",".join(s for s in (endpoint.secret, configured) if s)
    say(
        f"webhooks: emulator endpoint {endpoint.id} ({'reused' if endpoint.reused else 'registered'}) sends "
        f"{len(endpoint.event_types)} event types to {receiver_url}"
    )


RUNNER_QUERY_S = 2.0
"""How often serve's runner looks for flow runs to start (Prefect's default is 10 s): a run started from the
console, the Prefect UI, a schedule or an automation starts within 2 s. One small query to the local Prefect
server each time. ``PREFECT_RUNNER_POLL_FREQUENCY`` set in the environment wins."""
SHUTDOWN_S = 10.0
"""What a stop (Ctrl-C, SIGINT or SIGTERM to `payops serve`) may take at most, every child included."""
RUNNER_STOP_S = 4.0
DRAIN_S = 1.5
CHILDREN_GRACE_S = 2.5


class ServedDeployments:
    """Prefect's runner serving ``deployments`` on its own event loop in a worker thread.

    Not ``prefect.serve``: run in the main thread, the runner installs its own SIGTERM handler (which leaves
    its stop coroutine unawaited and exits from inside the loop) and shares the main thread with SIGINT, so
    a stop waits for whatever the runner waits for (API calls retried against a busy server, flow runs given
    30 s to end). In a worker thread, the main thread keeps the signals and stops the runner in a set time.
    """

    def __init__(self, deployments: list[Any]) -> None:
        self._deployments = deployments
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._runner: Any = None
        self.error: BaseException | None = None
        # Not Thread.join: a signal handler raising in join makes Python 3.11 take a running thread for ended.
        self._done = threading.Event()
        # The settings in force here (the Prefect API this process started) go with the thread.
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="payops-runner", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def alive(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float) -> bool:
        """True once the runner has ended (within ``timeout`` seconds)."""
        return self._done.wait(timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except asyncio.CancelledError:
            pass  # stopped
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self._done.set()

    async def _serve(self) -> None:
        from prefect.runner import Runner

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()  # type: ignore[assignment]
        query_s = None if "PREFECT_RUNNER_POLL_FREQUENCY" in os.environ else RUNNER_QUERY_S  # None: Prefect's
        self._runner = Runner(pause_on_shutdown=True, query_seconds=query_s)  # prefect.serve's runner
        for deployment in self._deployments:
            await self._runner.aadd_deployment(deployment)
        await self._runner.start()

    def stop(self, timeout: float) -> bool:
        """Stop the runner (its flow runs cancelled, schedules paused), at most ``timeout`` seconds; True
        when it ended in time. A runner still busy after 60 % of the time is cancelled outright."""
        loop, task, runner = self._loop, self._task, self._runner
        if loop is None or task is None or not self.alive():
            return not self.alive()
        try:
            if runner is not None and runner.started:
                asyncio.run_coroutine_threadsafe(runner.astop(), loop)
            else:
                loop.call_soon_threadsafe(task.cancel)
            if not self.wait(timeout * 0.6):
                loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # the loop closed meanwhile: the runner is done
        return self.wait(timeout * 0.4)


def drain_prefect_clients(timeout: float) -> None:
    """Send the events and logs this process still queues for Prefect while its server still answers
    (Prefect would otherwise try at interpreter exit, against a server stopped by then)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    deadline = time.monotonic() + timeout
    for worker in (EventsWorker, APILogWorker):
        worker.drain_all(timeout=max(0.1, deadline - time.monotonic()), at_exit=False)


def stop_everything(
    runner: ServedDeployments | None, sup: Supervisor, home: Path, say: Callable[[str], None]
) -> None:
    """The home's record first (commands stop finding a serve that is leaving), the runner (its flow runs
    report to the Prefect server), what this process queues for Prefect, every child at once, then any
    process left under this one; within :data:`SHUTDOWN_S`, which
    :func:`deployments.processes.exit_by_deadline` enforces whatever happens."""
    from payops.store.home import clear_serve_record

    exit_by_deadline(SHUTDOWN_S - 0.5, say)
    clear_serve_record(os.getpid(), home)
    if runner is not None and not runner.stop(RUNNER_STOP_S):
        say(f"the deployments' runner did not stop within {RUNNER_STOP_S:g} s; its flow runs are killed")
    try:
        drain_prefect_clients(DRAIN_S)
    except Exception as exc:  # noqa: BLE001 - a failed drain loses telemetry, never the stop
        say(f"events and logs not sent to Prefect: {type(exc).__name__}")
    sup.stop_all(CHILDREN_GRACE_S)
    kill_descendants(say)


def choose_port(host: str, wanted: int | None, previous: int | None, what: str) -> int:
    """``wanted`` when given (RuntimeError when something listens there: a health check would reach that
    other server, maybe another home's); else the port this home's serve used last when it is free (links
    keep working across restarts); else a free one."""
    if wanted:
        if not port_free(host, wanted):
            raise RuntimeError(f"the {what} port {wanted} is in use on {host}: choose another, or none")
        return wanted
    if previous and port_free(host, previous):
        return previous
    return free_port(host)


def run_all_in_one(
    *,
    port: int | None = None,
    console_port: int | None = None,
    sandbox: bool = False,
    sandbox_port: int | None = None,
    host: str = "127.0.0.1",
    say: Callable[[str], None] = print,
) -> int:
    """``payops serve``: Prefect server, (emulator), console and every deployment of this payops home, until
    Ctrl-C, SIGINT or SIGTERM; then everything stops within :data:`SHUTDOWN_S` (the process ends by then:
    call this from a command, never from a process that must outlive it).

    Ports not given are free ones (the home's previous ones when free); where everything is goes to the
    home's record (`store.home`), where every command of this home finds it, and is printed."""
    from payops.deployments.prefect_login import serve_login, without_prefect_login
    from payops.deployments.prefect_server import home_prefect_env, use_prefect_api
    from payops.store.home import ServeRecord, last_ports, read_serve_record, write_serve_record
    from payops.store.settings import PayopsSettings

    os.chdir(ROOT)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The served flow runs' heartbeat (Prefect's default is 180 s): a run whose process is gone is found
    # within 100 s (deployments/automations/recovery) and restarted.
    os.environ.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", HEARTBEAT_S)
    home = PayopsSettings.from_env().home_dir()
    running = read_serve_record(home)
    if running is not None:
        say(f"error: payops serve already runs for the home {home} (pid {running.pid}):")
        for line in running.lines():
            say(f"  {line}")
        return 1
    previous = last_ports(home)
    log_dir = home / "serve-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    sup = Supervisor(log_dir, say)
    runner: ServedDeployments | None = None
    code = 0
    with stop_on_signals(), ExitStack() as settings:
        try:
            configured = _api_configured()
            auth_file: str | None = None  # Prefect's login, when serve keeps it (its own server)
            ports = {
                "console": choose_port(host, console_port, previous.get("console"), "console"),
            }
            if not configured:
                ports["prefect"] = choose_port(host, port, previous.get("prefect"), "Prefect server")
            if sandbox:
                ports["sandbox"] = choose_port(host, sandbox_port, previous.get("sandbox"), "emulator")
            if not configured:
                prefect = f"http://{host}:{ports['prefect']}"
                login = serve_login(home)
                say(
                    f"starting a Prefect server on {prefect} (UI and API) behind a login: {login.where()}; "
                    "Prefect's UI asks for it ..."
                )
                env = prefect_server_env(host, ports["prefect"], home_prefect_env(os.environ, home))
                env["PREFECT_SERVER_API_AUTH_STRING"] = login.auth_string
                proc = sup.start("prefect-server", prefect_server_command(), env)
                wait_http(f"{prefect}/api/health", proc, 120, "the Prefect server")
                os.environ.setdefault("PAYOPS_PREFECT_UI_URL", prefect)  # for the flows served here
                # Its children inherit the API and its login (the console, the runner's flow runs). Prefect
                # read its settings at import: without them in this process's settings too, its own client
                # (templates, the runner) would start a second, hidden temporary server on the same SQLite
                # file, or meet the login unannounced.
                settings.enter_context(use_prefect_api(f"{prefect}/api", login.auth_string))
                auth_file = str(login.file) if login.file else None
            else:
                say("using the Prefect server at PREFECT_API_URL")
            env_file: Path | None = None
            sandbox_url = f"http://{host}:{ports.get('sandbox')}"
            if sandbox:
                env_file = home / "sandbox.env"
                say(f"starting the Payments Service emulator on {sandbox_url} ...")
                # The console's receiver is plain http on 127.0.0.1: the emulator must allow that URL.
                command = sandbox_command(host, ports["sandbox"], env_file, "--allow-local-webhooks")
                proc = sup.start("sandbox", command, without_prefect_login(os.environ))
                wait_http(f"{sandbox_url}/openapi.json", proc, 60, "the emulator")
                os.environ.update(read_env_file(env_file))
            # payops' settings as serve's children will read them (the emulator's credentials)
            payops = PayopsSettings.from_env()
            verify_key_file = approval_key(payops)  # the console signs, the flows served here verify
            ensure_first_admin(payops, say)
            console_url = f"http://{host}:{ports['console']}"
            # Report links in the artifacts of every run served here, the console's warm runs included.
            os.environ.setdefault("PAYOPS_CONSOLE_URL", console_url)
            console_env = dict(os.environ)
            console_env.setdefault("PAYOPS_PAYOUT_DEPLOYMENT", PAYOUT_DEPLOYMENT)
            console_env.setdefault("PAYOPS_WARM_RUNS", "true")  # its runs start on this host: no cold start
            if sandbox:
                wire_webhooks(sandbox_url, f"{console_url}{WEBHOOK_PATH}", console_env, say)
            console = [sys.executable, "-m", "payops.deployments.console", "--host", host]
            proc = sup.start("console", [*console, "--port", str(ports["console"])], console_env)
            wait_http(f"{console_url}/healthz", proc, 60, "the console")
            apply_alerts(payops, payops.console or console_url, say)
            specs = asyncio.run(resolve_templates(served_specs(load_specs())))
            deployments = runner_deployments(specs)
            runner = ServedDeployments(deployments)
            runner.start()
            record = ServeRecord(
                pid=os.getpid(),
                prefect_api_url=os.environ["PREFECT_API_URL"],
                prefect_ui_url=os.environ.get("PAYOPS_PREFECT_UI_URL"),
                console_url=console_url,
                sandbox_url=sandbox_url if sandbox else None,
                sandbox_env_file=str(env_file) if env_file else None,
                approval_verify_key_file=verify_key_file,
                prefect_auth_file=auth_file,
                ports=ports,
            )
            path = write_serve_record(record, home)
            say(f"payops home {home} (what runs here: {path})")
            for line in record.lines():
                say(f"  {line}")
            say(
                f"serving {len(deployments)} deployments; logs of the other processes in {log_dir}; "
                "Ctrl-C stops everything"
            )
            while not runner.wait(0.5):
                pass
            say(f"error: the deployments' runner stopped: {runner.error!r} (logs in {log_dir})")
            code = 1
        except StopRequested as stop:
            say(f"{stop} received: stopping everything (at most {SHUTDOWN_S:g} s)")
        except RuntimeError as exc:
            say(f"error: {exc} (logs in {log_dir})")
            code = 1
        finally:
            stop_everything(runner, sup, home, say)
    say("stopped")
    return code
