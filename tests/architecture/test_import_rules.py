"""The rooms keep to their import rules (docs/architecture.md), and the checker catches a broken one."""

from __future__ import annotations

import pytest

from tests.architecture.import_rules import ROOT, RULES, tree_violations, violations


def test_the_tree_keeps_every_import_rule() -> None:
    assert tree_violations() == []


def test_every_room_of_a_rule_exists() -> None:
    assert all((ROOT / rule.room).is_dir() for rule in RULES)


@pytest.mark.parametrize(
    ("room", "source", "culprit"),
    [
        ("connectors", "import prefect\n", "prefect"),
        ("connectors", "from prefect.artifacts import acreate_table_artifact\n", "prefect.artifacts"),
        ("connectors", "def f():\n    from sandbox import create_app\n", "sandbox"),
        ("sandbox", "from connectors.payments import PaymentsClient\n", "connectors.payments"),
        ("sandbox", "from connectors.payments._auth import TokenAuth\n", "connectors.payments._auth"),
        ("connectors", "from httpx_aiohttp import AiohttpTransport\n", "httpx_aiohttp"),
        ("flows", "import httpx\n", "httpx"),
        ("flows", "import aiohttp\n", "aiohttp"),
        ("flows", "async def f():\n    from httpx import AsyncClient\n", "httpx"),
        ("store", "from prefect import flow\n", "prefect"),
        ("store", "import httpx\n", "httpx"),
    ],
)
def test_a_forbidden_import_is_reported(room: str, source: str, culprit: str) -> None:
    found = violations(source, room, "synthetic.py")
    assert found, f"{room} importing {culprit} went unnoticed"
    assert all(line.startswith("synthetic.py:") for line in found)
    assert any(f"imports {culprit} " in line for line in found)


@pytest.mark.parametrize(
    ("room", "source"),
    [
        ("sandbox", "from connectors.payments.models import PayoutRequest\n"),
        ("sandbox", "from .errors import ApiError\n"),
        ("flows", "from tasks.polling import poll_payouts_task\nimport prefect\n"),
        ("connectors", "import httpx\nfrom pydantic import BaseModel\n"),
        ("store", "import sqlalchemy\n"),
        ("tasks", "import httpx\nimport prefect\nfrom httpx_aiohttp import AiohttpTransport\n"),
    ],
)
def test_allowed_imports_pass(room: str, source: str) -> None:
    assert violations(source, room) == []
