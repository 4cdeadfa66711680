"""The deployments of ``deployments/prefect.yaml`` as Python objects, and ``payops serve`` (local all-in-one).

``prefect.yaml`` is the one list of deployments: ``prefect deploy`` reads it for work pools, and
``payops serve`` reads it here and serves every deployment (schedules and triggers included) from one process.

The all-in-one starts, as child processes in their own process groups: a Prefect server behind a login
(unless ``PREFECT_API_URL`` is configured; `deployments.prefect_login`), the emulator with ``--sandbox``, and
the console; then it serves the deployments in this process. Ctrl-C, SIGINT or SIGTERM stops the runner and
every child within ``SHUTDOWN_S`` seconds; children also receive SIGTERM if this process dies
(``PR_SET_PDEATHSIG``).

Each child is handed its environment: one mapping built once (`children_env`), to which the Prefect API, the
emulator's credentials and the console's address are added as they become known. The served flow runs are the
exception Prefect's runner imposes: they get this process's environment (`flow_runs_environment`).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
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
    from payops.deployments.prefect_login import PrefectLogin
    from payops.store.home import ServeRecord
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


async def resolve_templates(
    specs: list[dict[str, Any]], env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Resolve ``{{ prefect.blocks.* }}``, ``{{ prefect.variables.* }}`` and ``{{ $ENV }}`` (from ``env``,
    default this process's environment) as ``prefect deploy`` does; event templates
    (``{{ event... | string }}``) are left for the automation."""
    from prefect.utilities.templating import (
        apply_values,
        resolve_block_document_references,
        resolve_variables,
    )

    resolved = await resolve_block_document_references(specs)
    resolved = await resolve_variables(resolved)
    return apply_values(resolved, dict(os.environ if env is None else env), remove_notset=False)


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


def configured_api_url() -> str | None:
    """The Prefect API configured for this process (``PREFECT_API_URL``: environment or Prefect profile);
    None: `payops serve` starts its own Prefect server."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


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

    def __init__(self, deployments: list[Any], query_seconds: float | None = RUNNER_QUERY_S) -> None:
        """``query_seconds``: how often the runner looks for flow runs to start (None: Prefect's
        ``PREFECT_RUNNER_POLL_FREQUENCY``)."""
        self._deployments = deployments
        self._query_seconds = query_seconds
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

    @property
    def count(self) -> int:
        """How many deployments it serves."""
        return len(self._deployments)

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
        self._runner = Runner(pause_on_shutdown=True, query_seconds=self._query_seconds)  # as prefect.serve
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


# -- the all-in-one, part by part ---------------------------------------------------------------------------
PART_NAMES = {"console": "console", "prefect": "Prefect server", "sandbox": "emulator"}
"""The parts of the all-in-one listening on a port, as its messages name them."""


def children_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment every process serve starts begins with (the Prefect server, the emulator, the
    console, the served flow runs): ``environ`` with serve's defaults, which a configured value overrides.
    Built once; :func:`start_parts` adds the Prefect API, the emulator's credentials and the console's
    address."""
    env = dict(environ)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The served flow runs' heartbeat (Prefect's default is 180 s): a run whose process is gone is found
    # within 100 s (deployments/automations/recovery) and restarted.
    env.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", HEARTBEAT_S)
    return env


def already_serving(home: Path, say: Callable[[str], None]) -> bool:
    """True, and said with where everything of it is, when a `payops serve` of ``home`` runs already."""
    from payops.store.home import read_serve_record

    running = read_serve_record(home)
    if running is None:
        return False
    say(f"error: payops serve already runs for the home {home} (pid {running.pid}):")
    for line in running.lines():
        say(f"  {line}")
    return True


def choose_ports(host: str, wanted: Mapping[str, int | None], previous: Mapping[str, int]) -> dict[str, int]:
    """A port for each part named in ``wanted`` (its port, or None: any), in that order (:func:`choose_port`;
    ``previous``: the ports this home's last serve used)."""
    return {
        part: choose_port(host, port, previous.get(part), PART_NAMES[part]) for part, port in wanted.items()
    }


@dataclass(frozen=True)
class PrefectServer:
    """serve's own Prefect server: its address (UI and API on one port) and its login."""

    url: str
    login: PrefectLogin

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def client_env(self) -> dict[str, str]:
        """What a client of this server needs in its environment: the API and its login."""
        return {"PREFECT_API_URL": self.api_url, "PREFECT_API_AUTH_STRING": self.login.auth_string}


def start_prefect_server(
    sup: Supervisor, host: str, port: int, home: Path, env: Mapping[str, str], say: Callable[[str], None]
) -> PrefectServer:
    """Start serve's Prefect server on ``host:port`` from ``env``, its database under ``home`` and its API
    behind the home's login (`deployments.prefect_login`); return it once it answers."""
    from payops.deployments.prefect_login import serve_login
    from payops.deployments.prefect_server import home_prefect_env

    server = PrefectServer(f"http://{host}:{port}", serve_login(home))
    say(
        f"starting a Prefect server on {server.url} (UI and API) behind a login: {server.login.where()}; "
        "Prefect's UI asks for it ..."
    )
    server_env = prefect_server_env(host, port, home_prefect_env(env, home))
    server_env["PREFECT_SERVER_API_AUTH_STRING"] = server.login.auth_string
    proc = sup.start("prefect-server", prefect_server_command(), server_env)
    wait_http(f"{server.api_url}/health", proc, 120, "the Prefect server")
    return server


def use_prefect_server(server: PrefectServer, env: dict[str, str], stack: ExitStack) -> None:
    """Everything started from here on uses ``server``: the children through ``env`` (its API and login, and
    its UI for the links of the flows served here), this process through its Prefect settings until ``stack``
    closes. Prefect read its settings at import: without them, its client here (templates, the runner) would
    start a second, hidden temporary server on the same SQLite file, or meet the login unannounced. The
    runner hands these settings on to its flow runs."""
    from payops.deployments.prefect_server import this_process_uses_prefect_api

    env.update(server.client_env())
    env.setdefault("PAYOPS_PREFECT_UI_URL", server.url)
    stack.enter_context(this_process_uses_prefect_api(server.api_url, server.login.auth_string))


def start_emulator(
    sup: Supervisor, host: str, port: int, env_file: Path, env: Mapping[str, str], say: Callable[[str], None]
) -> dict[str, str]:
    """Start the emulator on ``host:port`` from ``env`` without Prefect's login (it never talks to Prefect);
    return, once it answers, the client settings (its credentials) it wrote to ``env_file``."""
    from payops.deployments.prefect_login import without_prefect_login

    url = f"http://{host}:{port}"
    say(f"starting the Payments Service emulator on {url} ...")
    # The console's receiver is plain http on 127.0.0.1: the emulator must allow that URL.
    command = sandbox_command(host, port, env_file, "--allow-local-webhooks")
    proc = sup.start("sandbox", command, without_prefect_login(env))
    wait_http(f"{url}/openapi.json", proc, 60, "the emulator")
    return read_env_file(env_file)


def start_console(
    sup: Supervisor,
    host: str,
    port: int,
    env: Mapping[str, str],
    sandbox_url: str | None,
    say: Callable[[str], None],
) -> None:
    """Start the console on ``host:port`` from ``env`` and its own settings (runs of the served payout
    deployment, started warm on this host; with ``sandbox_url``, the signing secret of the webhook endpoint
    registered with the emulator for it); return once it answers."""
    url = f"http://{host}:{port}"
    console_env = dict(env)
    console_env.setdefault("PAYOPS_PAYOUT_DEPLOYMENT", PAYOUT_DEPLOYMENT)
    console_env.setdefault("PAYOPS_WARM_RUNS", "true")  # its runs start on this host: no cold start
    if sandbox_url is not None:
        wire_webhooks(sandbox_url, f"{url}{WEBHOOK_PATH}", console_env, say)
    command = [sys.executable, "-m", "payops.deployments.console", "--host", host, "--port", str(port)]
    proc = sup.start("console", command, console_env)
    wait_http(f"{url}/healthz", proc, 60, "the console")


def start_parts(
    host: str,
    ports: Mapping[str, int],
    configured_api: str | None,
    settings: PayopsSettings,
    env: dict[str, str],
    sup: Supervisor,
    stack: ExitStack,
    say: Callable[[str], None],
) -> ServeRecord:
    """Start, in order: the Prefect server on ``ports["prefect"]`` (unless ``configured_api``: the Prefect API
    configured), the emulator (when ``ports`` has ``sandbox``), the home's keys and first admin, the console
    and the alerts; ``env`` gains what each makes known. Returns the record of where everything is."""
    from payops.store.home import ServeRecord

    home = settings.home_dir()
    auth_file: str | None = None  # Prefect's login, when serve keeps it (its own server)
    if configured_api is None:
        server = start_prefect_server(sup, host, ports["prefect"], home, env, say)
        use_prefect_server(server, env, stack)
        api_url, auth_file = server.api_url, (str(server.login.file) if server.login.file else None)
    else:
        say("using the Prefect server at PREFECT_API_URL")
        api_url = env.get("PREFECT_API_URL") or configured_api
    sandbox_url: str | None = None
    env_file: Path | None = None
    if "sandbox" in ports:
        sandbox_url, env_file = f"http://{host}:{ports['sandbox']}", home / "sandbox.env"
        env.update(start_emulator(sup, host, ports["sandbox"], env_file, env, say))
    # payops' settings as serve's children read them (the Prefect UI's address serve gives them)
    settings = settings.model_copy(update={"prefect_ui_url": env.get("PAYOPS_PREFECT_UI_URL") or None})
    verify_key_file = approval_key(settings)  # the console signs, the flows served here verify
    ensure_first_admin(settings, say)
    console_url = f"http://{host}:{ports['console']}"
    # Report links in the artifacts of every run served here, the console's warm runs included.
    env.setdefault("PAYOPS_CONSOLE_URL", console_url)
    start_console(sup, host, ports["console"], env, sandbox_url, say)
    apply_alerts(settings, settings.console or console_url, say)
    return ServeRecord(
        pid=os.getpid(),
        prefect_api_url=api_url,
        prefect_ui_url=env.get("PAYOPS_PREFECT_UI_URL"),
        console_url=console_url,
        sandbox_url=sandbox_url,
        sandbox_env_file=str(env_file) if env_file else None,
        approval_verify_key_file=verify_key_file,
        prefect_auth_file=auth_file,
        ports=dict(ports),
    )


@contextmanager
def flow_runs_environment(env: Mapping[str, str]) -> Iterator[None]:
    """The flow runs served from this process get ``env``: the one place `payops serve` writes its own
    environment, for the time it serves (the previous values come back when the block ends).

    Why here: Prefect 3.8's ``Runner`` takes no environment for the flow runs it starts. Each run's process
    gets this process's ``os.environ``, then its Prefect settings, then the runner's own variables (run id,
    heartbeat; prefect/runner/_starter_engine.py ``EngineCommandStarter.start``; ``Runner`` builds it with no
    ``env``). A deployment's ``job_variables`` are a work pool's: the runner never reads them, and Prefect
    refuses them on a deployment without a pool (``RunnerDeployment.aapply``); they would also put the
    service's credential where anyone with Prefect's login reads it. Prefect's own settings reach the runs
    through this process's settings too (:func:`use_prefect_server`), but payops' (the emulator's
    credentials, the console's and the Prefect UI's addresses) only through this environment: the runs get
    all of ``env`` this way, as the other children get it."""
    previous = {key: os.environ.get(key) for key, value in env.items() if os.environ.get(key) != value}
    os.environ.update({key: env[key] for key in previous})
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def serve_deployments(env: Mapping[str, str], stack: ExitStack) -> ServedDeployments:
    """Serve the deployments of prefect.yaml that serve serves (its ``{{ $VAR }}`` templates read from
    ``env``) in a worker thread, their flow runs started with ``env`` until ``stack`` closes."""
    specs = asyncio.run(resolve_templates(served_specs(load_specs()), env))
    deployments = runner_deployments(specs)
    stack.enter_context(flow_runs_environment(env))
    query_s = None if "PREFECT_RUNNER_POLL_FREQUENCY" in env else RUNNER_QUERY_S  # None: Prefect's
    runner = ServedDeployments(deployments, query_s)
    runner.start()
    return runner


def announce(record: ServeRecord, home: Path, log_dir: Path, served: int, say: Callable[[str], None]) -> None:
    """Write ``record`` to the home (where every command of the home finds this serve) and say it."""
    from payops.store.home import write_serve_record

    path = write_serve_record(record, home)
    say(f"payops home {home} (what runs here: {path})")
    for line in record.lines():
        say(f"  {line}")
    say(f"serving {served} deployments; logs of the other processes in {log_dir}; Ctrl-C stops everything")


def serve_until_stopped(runner: ServedDeployments, log_dir: Path, say: Callable[[str], None]) -> int:
    """Wait while ``runner`` serves (a stop request ends the wait: :class:`StopRequested`); a runner that
    ends by itself is an error, said; returns the exit code."""
    while not runner.wait(0.5):
        pass
    say(f"error: the deployments' runner stopped: {runner.error!r} (logs in {log_dir})")
    return 1


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
    from payops.store.home import last_ports
    from payops.store.settings import PayopsSettings

    os.chdir(ROOT)
    env = children_env(os.environ)
    settings = PayopsSettings.from_env()
    home = settings.home_dir()
    if already_serving(home, say):
        return 1
    previous = last_ports(home)
    log_dir = home / "serve-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    sup = Supervisor(log_dir, say)
    runner: ServedDeployments | None = None
    code = 0
    with stop_on_signals(), ExitStack() as stack:
        try:
            configured = configured_api_url()
            wanted: dict[str, int | None] = {"console": console_port}
            if configured is None:
                wanted["prefect"] = port
            if sandbox:
                wanted["sandbox"] = sandbox_port
            ports = choose_ports(host, wanted, previous)
            record = start_parts(host, ports, configured, settings, env, sup, stack, say)
            runner = serve_deployments(env, stack)
            announce(record, home, log_dir, runner.count, say)
            code = serve_until_stopped(runner, log_dir, say)
        except StopRequested as stop:
            say(f"{stop} received: stopping everything (at most {SHUTDOWN_S:g} s)")
        except RuntimeError as exc:
            say(f"error: {exc} (logs in {log_dir})")
            code = 1
        finally:
            stop_everything(runner, sup, home, say)
    say("stopped")
    return code
