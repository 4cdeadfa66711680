"""The walk the rule checkers share: a finder over every module of some top folders (rooms)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def find_in_rooms(
    find: Callable[[str, str], list[str]], rooms: Sequence[str], home: str | None = None
) -> list[str]:
    """What ``find(source, filename)`` reports over every module of ``rooms`` (paths from the repository's
    root), but ``home``: where the rule is stated."""
    found = []
    for room in rooms:
        for path in sorted((ROOT / room).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name != home:
                found += find(path.read_text(encoding="utf-8"), name)
    return found
