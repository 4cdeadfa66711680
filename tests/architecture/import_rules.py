"""The import rules of docs/architecture.md, as data, and a checker that reads modules with ``ast``.

Every ``import``/``from … import`` counts, at module level or inside a function, so a lazy import cannot
hide a dependency. Relative imports stay inside their own package and never break a rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Rule:
    """Modules under ``room`` must not import ``forbidden`` (a module and everything below it), except the
    modules listed in ``allowed`` (and everything below them)."""

    room: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    why: str = ""

    def breaks(self, module: str) -> bool:
        def within(name: str, prefixes: tuple[str, ...]) -> bool:
            return any(name == p or name.startswith(p + ".") for p in prefixes)

        return within(module, self.forbidden) and not within(module, self.allowed)


RULES = (
    Rule("connectors", ("prefect", "sandbox"), why="the client works without Prefect and knows no emulator"),
    Rule(
        "sandbox",
        ("connectors",),
        allowed=("connectors.payments.models", "connectors.payments.contract"),
        why="the emulator shares the wire models and the authored contract with the client, nothing else",
    ),
    Rule(
        "connectors",
        ("aiohttp", "httpx_aiohttp"),
        why="the client is httpx's; the transport under it is its caller's choice (tasks/clients.py)",
    ),
    Rule("flows", ("httpx", "aiohttp"), why="flows compose tasks; HTTP is the connector's business"),
    Rule("store", ("prefect", "httpx"), why="the database room is plain SQLAlchemy"),
)


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import; ``from a import b`` yields ``a`` and ``a.b``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def violations(source: str, room: str, where: str = "<module>") -> list[str]:
    """Each import in ``source`` (a module of ``room``) that breaks a rule, as ``where:line: message``."""
    out = []
    for rule in RULES:
        if rule.room != room:
            continue
        for line, module in imported_modules(source):
            if rule.breaks(module):
                out.append(f"{where}:{line}: {room} imports {module} ({rule.why})")
    return sorted(set(out))


def tree_violations(root: Path = ROOT) -> list[str]:
    """Every rule broken anywhere in the checkout."""
    out: list[str] = []
    for rule_room in sorted({r.room for r in RULES}):
        for path in sorted((root / rule_room).rglob("*.py")):
            where = str(path.relative_to(root))
            out.extend(violations(path.read_text(encoding="utf-8"), rule_room, where))
    return out
