"""Just enough Markdown for the documentation tests: sections, table rows, code spans and code lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
SPAN = re.compile(r"`([^`\n]+)`")
FENCE = "```"


def read(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Section:
    """A heading and the text up to the next heading (of any level)."""

    heading: str
    body: str


def _prose_lines(text: str) -> list[tuple[bool, str]]:
    """Each line with whether it is inside a fenced code block."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
            continue
        out.append((fenced, line))
    return out


def sections(text: str) -> list[Section]:
    found: list[Section] = []
    heading, body = "", []
    for fenced, line in _prose_lines(text):
        match = None if fenced else HEADING.match(line)
        if match:
            found.append(Section(heading, "\n".join(body)))
            heading, body = match.group(2), []
        else:
            body.append(line)
    found.append(Section(heading, "\n".join(body)))
    return [s for s in found if s.heading]


def section(text: str, title: str) -> Section:
    """The section whose heading is `title`; AssertionError naming the headings there are."""
    every = sections(text)
    for s in every:
        if s.heading == title:
            return s
    raise AssertionError(f"no section {title!r}; headings: {[s.heading for s in every]}")


def table_rows(body: str) -> list[list[str]]:
    """The cells of every table row of `body`, header and separator rows left out."""
    rows = []
    lines = [ln.strip() for ln in body.splitlines()]
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.fullmatch(r"\|[\s|:-]+\|", line) or re.fullmatch(r"\|[\s|:-]+\|", nxt):
            continue  # a separator, or the header above one
        cells = re.split(r"(?<!\\)\|", line.strip("|"))
        rows.append([c.strip() for c in cells])
    return rows


def spans(text: str) -> list[str]:
    """Inline code spans."""
    return SPAN.findall(text)


def code_texts(text: str) -> list[str]:
    """What a reader would type: every line of a fenced block (without its `#` comment) and every inline
    code span outside them."""
    out = []
    for fenced, line in _prose_lines(text):
        if fenced:
            out.append(line.split(" #", 1)[0])
        else:
            out.extend(spans(line))
    return out
