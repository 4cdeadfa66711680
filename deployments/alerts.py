"""Alert automations: the files of ``deployments/automations/`` applied to a Prefect server; a test message.

Each file is one Prefect automation: an event trigger on a ``payops.*`` event (`tasks.events.alerts`) and the
subject and body of the message (Jinja, rendered by the server's actions service). Applying them adds the one
action, "send a notification through block X", so which channel (Slack, Teams, email, a pager webhook) is the
admin's choice at apply time, not in the files.

`apply_automations` is idempotent: an automation is found by its name (every name starts with ``payops: ``)
and updated in place; copies with the same name are removed, so re-applying never duplicates a message.

Links in the templates: ``${console_url}`` (the console, for payout runs: the run page lists its reports) and
``${prefect_ui_url}`` (the Prefect UI, for the other flows) are filled in at apply time; ``{{ ... }}`` is left
for the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any
from uuid import UUID

import yaml

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

AUTOMATIONS_DIR = Path(__file__).with_name("automations")
RECOVERY_DIR = AUTOMATIONS_DIR / "recovery"
"""Automations that act on runs rather than tell people (a payout run whose process is gone is marked
Crashed and started again, as is one a dead worker took but never started; a run stuck cancelling is
ended): applied with the alerts, and by `payops serve` whether or not alerts are on. Each file holds its own
actions."""
NAME_PREFIX = "payops: "
DEFAULT_CONSOLE_URL = "http://127.0.0.1:8400"
TEST_SUBJECT = "payops test alert"
TEST_BODY = "This is a test message from payops: alerts reach this channel."


class AlertSetupError(Exception):
    """An automation file or the chosen block is wrong; ``str(e)`` is one line for the operator."""


@dataclass(frozen=True)
class AlertSpec:
    """One automation file: its name, trigger and message templates."""

    path: Path
    name: str
    description: str
    trigger: dict[str, Any]
    subject: str
    body: str


def load_alert_specs(folder: Path = AUTOMATIONS_DIR) -> list[AlertSpec]:
    """Every ``*.yaml`` of ``folder``, checked: name prefix, an event trigger Prefect accepts, templates."""
    from prefect.events.schemas.automations import EventTrigger
    from pydantic import ValidationError

    specs = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise AlertSetupError(f"{path.name}: not valid YAML ({exc})") from None
        missing = [k for k in ("name", "trigger", "subject", "body") if not doc.get(k)]
        if missing:
            raise AlertSetupError(f"{path.name}: missing {', '.join(missing)}")
        if not str(doc["name"]).startswith(NAME_PREFIX):
            raise AlertSetupError(f"{path.name}: name must start with {NAME_PREFIX!r}")
        try:
            EventTrigger.model_validate(doc["trigger"])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise AlertSetupError(f"{path.name}: trigger.{where}: {first['msg']}") from None
        specs.append(
            AlertSpec(
                path, doc["name"], doc.get("description", ""), doc["trigger"], doc["subject"], doc["body"]
            )
        )
    if not specs:
        raise AlertSetupError(f"no automation files in {folder}")
    return specs


def prefect_ui_url(settings: PayopsSettings) -> str:
    """The Prefect UI address for links: PAYOPS_PREFECT_UI_URL, PREFECT_UI_URL, else the API's host."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

    configured = settings.prefect_ui_url or PREFECT_UI_URL.value()
    if configured:
        return str(configured).rstrip("/")
    api = str(PREFECT_API_URL.value() or "http://127.0.0.1:4200/api")
    return api.rstrip("/").removesuffix("/api")


def console_url(settings: PayopsSettings) -> str:
    """The console address for links: PAYOPS_CONSOLE_URL, else this payops home's `payops serve` console,
    else the local default."""
    from payops.store.home import read_serve_record

    record = read_serve_record(settings.home_dir())
    served = record.console_url if record is not None else None
    return (settings.console or served or DEFAULT_CONSOLE_URL).rstrip("/")


def fill_links(template: str, console: str, prefect_ui: str) -> str:
    """Fill ``${console_url}`` and ``${prefect_ui_url}``; anything else (Jinja) is left as written."""
    return Template(template).safe_substitute(console_url=console, prefect_ui_url=prefect_ui)


async def resolve_block(name: str) -> tuple[UUID, str]:
    """(block document id, ``slug/name``) of a notification block given as ``NAME`` or ``TYPE-SLUG/NAME``."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    slug, _, bare = name.rpartition("/")
    async with get_client() as client:
        if slug:
            try:
                docs = [await client.read_block_document_by_name(bare, slug, include_secrets=False)]
            except ObjectNotFound:
                docs = []
        else:
            docs = [d for d in await client.read_block_documents(include_secrets=False) if d.name == bare]
    notifiers = [d for d in docs if "notify" in (d.block_schema.capabilities if d.block_schema else [])]
    if not notifiers:
        kinds = f" ({', '.join(sorted({d.block_type.slug for d in docs if d.block_type}))} cannot notify)"
        raise AlertSetupError(
            f"no notification block named {name!r}"
            + (kinds if docs else "")
            + "; create one first (docs/operations.md, 'Alerts')"
        )
    if len(notifiers) > 1:
        options = ", ".join(sorted(f"{d.block_type.slug}/{d.name}" for d in notifiers if d.block_type))
        raise AlertSetupError(f"several notification blocks are named {name!r}: use one of {options}")
    doc = notifiers[0]
    return doc.id, f"{doc.block_type.slug if doc.block_type else slug}/{doc.name}"


def load_recovery_automations(folder: Path = RECOVERY_DIR) -> list[Any]:
    """Every ``*.yaml`` of ``folder`` as a Prefect automation (trigger and actions as written), checked."""
    from prefect.automations import AutomationCore
    from pydantic import ValidationError

    automations = []
    for path in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not str(doc.get("name", "")).startswith(NAME_PREFIX):
            raise AlertSetupError(f"{path.name}: name must start with {NAME_PREFIX!r}")
        try:
            automations.append(AutomationCore.model_validate({"enabled": True, **doc}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise AlertSetupError(f"{path.name}: {where}: {first['msg']}") from None
    return automations


async def _upsert(client: Any, automation: Any) -> str:
    """Create or update the automation of that name (copies removed); "created" or "updated"."""
    existing = await client.read_automations_by_name(automation.name)
    if existing:
        await client.update_automation(existing[0].id, automation)
        for extra in existing[1:]:
            await client.delete_automation(extra.id)
        return "updated"
    await client.create_automation(automation)
    return "created"


async def apply_recovery(folder: Path = RECOVERY_DIR) -> list[tuple[str, str]]:
    """Create or update every recovery automation (`RECOVERY_DIR`); (name, "created" | "updated") each."""
    from prefect.client.orchestration import get_client

    automations = load_recovery_automations(folder)
    async with get_client() as client:
        return [(a.name, await _upsert(client, a)) for a in automations]


async def apply_automations(
    block: str,
    settings: PayopsSettings,
    *,
    console: str | None = None,
    prefect_ui: str | None = None,
    folder: Path = AUTOMATIONS_DIR,
) -> list[tuple[str, str]]:
    """Create or update every automation of ``folder`` to notify through ``block``, and the recovery
    automations (`apply_recovery`). Returns (name, "created" | "updated") per automation."""
    from prefect.automations import AutomationCore, EventTrigger, SendNotification
    from prefect.client.orchestration import get_client

    specs = load_alert_specs(folder)
    block_id, _ = await resolve_block(block)
    console = console or console_url(settings)
    prefect_ui = prefect_ui or prefect_ui_url(settings)
    done = []
    async with get_client() as client:
        for spec in specs:
            automation = AutomationCore(
                name=spec.name,
                description=spec.description,
                enabled=True,
                trigger=EventTrigger.model_validate(spec.trigger),
                actions=[
                    SendNotification(
                        block_document_id=block_id,
                        subject=fill_links(spec.subject, console, prefect_ui),
                        body=fill_links(spec.body, console, prefect_ui),
                    )
                ],
            )
            done.append((spec.name, await _upsert(client, automation)))
    return done + await apply_recovery()


async def send_test(block: str) -> str:
    """Send a test message straight through the block; returns its ``slug/name``."""
    import prefect.blocks.notifications  # noqa: F401 - registers the built-in notification block types
    from prefect.blocks.core import Block

    _, full_name = await resolve_block(block)
    notifier = await Block.aload(full_name)
    await notifier.anotify(TEST_BODY, TEST_SUBJECT)
    return full_name
