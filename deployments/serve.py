"""The deployments of ``deployments/prefect.yaml`` as Python objects, and ``payops serve`` (local all-in-one).

``prefect.yaml`` is the one list of deployments: ``prefect deploy`` reads it for work pools, and
``payops serve`` reads it here and serves every deployment (schedules and triggers included) from one process.

The all-in-one starts, as child processes in their own process groups: a Prefect server (unless
``PREFECT_API_URL`` is configured), the emulator with ``--sandbox``, and the console; then it serves the
deployments in this process. Ctrl-C (or SIGTERM) stops the runner and terminates every child; children also
receive SIGTERM if this process dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml

from deployments.demo import read_env_file, sandbox_command
from tasks.child_processes import preexec_own_group_dying_with_parent

ROOT = Path(__file__).resolve().parents[1]
PREFECT_YAML = Path(__file__).with_name("prefect.yaml")
PAYOUT_DEPLOYMENT = "payout-spreadsheet/payout-spreadsheet"


# -- prefect.yaml ------------------------------------------------------------------------------------------
def load_specs(path: Path = PREFECT_YAML) -> list[dict[str, Any]]:
    """The ``deployments`` entries of a prefect.yaml (YAML anchors resolved)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(document.get("deployments") or [])


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


def entrypoint_path(entrypoint: str, root: Path = ROOT) -> Path:
    return root / entrypoint.rsplit(":", 1)[0]


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


def runner_deployments(
    specs: list[dict[str, Any]], root: Path = ROOT, warn: Callable[[str], None] = print
) -> list[Any]:
    """``flow.to_deployment(...)`` for every spec whose entrypoint file exists (the others are reported)."""
    from prefect.flows import load_flow_from_entrypoint

    deployments = []
    for spec in specs:
        if not entrypoint_path(spec["entrypoint"], root).is_file():
            warn(f"skipping deployment {spec['name']!r}: {spec['entrypoint']} does not exist yet")
            continue
        flow = load_flow_from_entrypoint(spec["entrypoint"], use_placeholder_flow=False)
        deployments.append(
            flow.to_deployment(
                name=spec["name"],
                description=spec.get("description"),
                tags=spec.get("tags"),
                parameters=spec.get("parameters") or {},
                schedules=schedules_of(spec),
                triggers=triggers_of(spec),
            )
        )
    return deployments


# -- child processes ---------------------------------------------------------------------------------------
def start_child(
    cmd: list[str], env: Mapping[str, str], log_path: Path | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own process group; output to ``log_path`` (or discarded)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_own_group_dying_with_parent(),
        )  # noqa: PLW1509 - setsid + pdeathsig only
    finally:
        if log_path:
            out.close()  # type: ignore[union-attr]


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """``sig`` (SIGTERM) to the child's process group, SIGKILL after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        proc.wait(5)


def wait_http(url: str, proc: subprocess.Popen[bytes] | None, timeout: float, what: str) -> None:
    """Wait until ``url`` answers 200, or fail when the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer at {url} within {timeout:.0f} s")


def prefect_cli() -> list[str]:
    return [sys.executable, "-m", "prefect"]


def prefect_server_env(host: str, port: int, base: Mapping[str, str]) -> dict[str, str]:
    """Environment of ``prefect server start`` on ``host:port`` (API and UI on the same port)."""
    from deployments.console.settings import prefect_home

    env = dict(base)
    env.pop("PREFECT_API_URL", None)
    env.update(
        {
            "PREFECT_SERVER_API_HOST": host,
            "PREFECT_SERVER_API_PORT": str(port),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_API_URL": f"http://{host}:{port}/api",
            "PREFECT_SERVER_UI_STATIC_DIRECTORY": env.get("PREFECT_SERVER_UI_STATIC_DIRECTORY")
            or str(prefect_home() / "ui-build"),
        }
    )
    return env


class Supervisor:
    """Children started in order, stopped in reverse order."""

    def __init__(self, log_dir: Path, say: Callable[[str], None] = print) -> None:
        self.log_dir = log_dir
        self.say = say
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, cmd: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        proc = start_child(cmd, env, self.log_dir / f"{name}.log")
        self.children.append((name, proc))
        return proc

    def stop_all(self) -> None:
        for name, proc in reversed(self.children):
            if proc.poll() is None:
                self.say(f"stopping {name} ...")
            stop_child(proc)
        self.children.clear()


def _api_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def approval_key(env: MutableMapping[str, str], home: Path) -> str | None:
    """Make sure runs can be approved: keep a configured key (variable or Secret block name), else keep a
    random one in a 0600 file under ``home`` and put it in ``env``; returns that file's path."""
    if env.get("PAYOPS_APPROVAL_KEY") or env.get("PAYOPS_APPROVAL_KEY_BLOCK"):
        return None
    path = home / "approval-key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    env["PAYOPS_APPROVAL_KEY"] = path.read_text().strip()
    return str(path)


FIRST_ADMIN = "admin"


def ensure_first_admin(home: Path, say: Callable[[str], None] = print) -> Path | None:
    """Say the approval policy in force; on a database without an enabled admin: create ``admin`` with a
    random password written to a 0600 file under ``home``; returns the file (never the password itself)."""
    from store import migrate, open_engine
    from store.approvals import Approvals
    from store.users import Users
    from tasks.auditing import Auditor

    engine = open_engine()
    try:
        migrate(engine)
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
        Auditor(engine, lambda **event: None).record("payops serve", "user.added", f"user:{FIRST_ADMIN}")
        say(
            f"first admin created: user {FIRST_ADMIN!r}, password in {path} (mode 0600); "
            "reset it on the console's Users page"
        )
        return path
    finally:
        engine.dispose()


def apply_alerts(say: Callable[[str], None]) -> bool:
    """Apply the alert automations when ``PAYOPS_ALERTS_BLOCK`` names a notification block (operations.md).
    A wrong block is reported and the rest of the all-in-one still starts: alerts are not worth an outage."""
    from deployments.alerts import AlertSetupError, apply_automations

    block = os.environ.get("PAYOPS_ALERTS_BLOCK")
    if not block:
        say("alerts: off (set PAYOPS_ALERTS_BLOCK to a notification block to turn them on)")
        return False
    try:
        done = asyncio.run(apply_automations(block))
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
    from deployments.webhook_endpoint import ensure_endpoint, subscribed_types
    from tasks.payment_events import DEFAULT_FORWARD

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


@contextmanager
def _terminate_on_sigterm() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_all_in_one(
    *,
    port: int = 4200,
    console_port: int = 8400,
    sandbox: bool = False,
    sandbox_port: int = 8800,
    host: str = "127.0.0.1",
    say: Callable[[str], None] = print,
) -> int:
    """``payops serve``: Prefect server, (emulator), console and every deployment, until Ctrl-C."""
    from prefect import serve
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.console.settings import prefect_home
    from store import payops_home

    os.chdir(ROOT)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    log_dir = prefect_home() / "payops" / "serve-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    sup = Supervisor(log_dir, say)
    with _terminate_on_sigterm(), ExitStack() as settings:
        try:
            if not _api_configured():
                say(f"starting a Prefect server on http://{host}:{port} (UI and API) ...")
                env = prefect_server_env(host, port, os.environ)
                proc = sup.start("prefect-server", [*prefect_cli(), "server", "start"], env)
                wait_http(f"http://{host}:{port}/api/health", proc, 120, "the Prefect server")
                os.environ["PREFECT_API_URL"] = f"http://{host}:{port}/api"
                os.environ.setdefault("PAYOPS_PREFECT_UI_URL", f"http://{host}:{port}")
                # Prefect read its settings at import: without this, this process's own client (templates,
                # the runner) would start a second, hidden temporary server on the same SQLite file.
                settings.enter_context(
                    temporary_settings(updates={PREFECT_API_URL: os.environ["PREFECT_API_URL"]})
                )
            else:
                say("using the Prefect server at PREFECT_API_URL")
            if sandbox:
                env_file = log_dir / "sandbox.env"
                say(f"starting the Payments Service emulator on http://{host}:{sandbox_port} ...")
                # The console's receiver is plain http on 127.0.0.1: the emulator must allow that URL.
                command = sandbox_command(host, sandbox_port, env_file, "--allow-local-webhooks")
                proc = sup.start("sandbox", command, os.environ)
                wait_http(f"http://{host}:{sandbox_port}/openapi.json", proc, 60, "the emulator")
                os.environ.update(read_env_file(env_file))
            home = payops_home()
            approval_key(os.environ, home)  # this process serves the flows, the console is its child
            ensure_first_admin(home, say)
            console_env = dict(os.environ)
            console_env.setdefault("PAYOPS_PAYOUT_DEPLOYMENT", PAYOUT_DEPLOYMENT)
            if sandbox:
                receiver = f"http://{host}:{console_port}{WEBHOOK_PATH}"
                wire_webhooks(f"http://{host}:{sandbox_port}", receiver, console_env, say)
            proc = sup.start(
                "console",
                [sys.executable, "-m", "deployments.console", "--host", host, "--port", str(console_port)],
                console_env,
            )
            wait_http(f"http://{host}:{console_port}/healthz", proc, 60, "the console")
            say(f"console: http://{host}:{console_port}")
            os.environ.setdefault("PAYOPS_CONSOLE_URL", f"http://{host}:{console_port}")
            apply_alerts(say)
            specs = asyncio.run(resolve_templates(load_specs()))
            deployments = runner_deployments(specs, warn=say)
            say(
                f"serving {len(deployments)} deployments; logs of the other processes in {log_dir}; "
                "Ctrl-C stops everything"
            )
            serve(*deployments, print_starting_message=False)
        except KeyboardInterrupt:
            say("interrupted")
        except RuntimeError as exc:
            say(f"error: {exc} (logs in {log_dir})")
            return 1
        finally:
            sup.stop_all()
    say("stopped")
    return 0
