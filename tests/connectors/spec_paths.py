"""Where the shared spec lives: ``../shared/spec`` beside the repository (as in CI)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPEC = (REPO / ".." / "shared" / "spec" / "payments-api.md").resolve()


def spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def spec_endpoints() -> set[str]:
    """Every "METHOD /v1/path" named in the spec (headings, tables and prose)."""
    found = re.findall(r"\b(GET|POST|PUT|PATCH|DELETE) (/v1/[A-Za-z0-9_\-/{}]+)", spec_text())
    return {f"{method} {path.rstrip('/')}" for method, path in found}


def spec_error_rows() -> list[tuple[int, str]]:
    """(status, code) rows of the spec's error table; a row may list several codes."""
    section = spec_text().split("## Errors", 1)[1].split("Retry rules", 1)[0]
    rows: list[tuple[int, str]] = []
    for status, codes in re.findall(r"^\| (\d{3}) \| ([a-z_, ]+) \|", section, flags=re.M):
        rows.extend((int(status), code.strip()) for code in codes.split(","))
    return rows
