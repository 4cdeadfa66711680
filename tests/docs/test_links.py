"""Every relative link of the README and the docs reaches a file, and a heading there when it names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import ROOT, sections

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours to check
        name, _, fragment = target.partition("#")
        linked = (page.parent / name).resolve() if name else page
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif fragment and fragment not in {anchor(s.heading) for s in sections(linked.read_text("utf-8"))}:
            problems.append(f"{target}: no such heading")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_links_resolve(page: str) -> None:
    assert broken_links(ROOT / page) == []


def test_a_broken_link_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Local all-in-one: `payops serve` (`make serve`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#local-all-in-one-payops-serve-make-serve) [b](other.md#gone) [c](missing.md) "
        "[d](https://example.com/x#y)\n"
    )
    assert broken_links(page) == ["other.md#gone: no such heading", "missing.md: no such file"]


SHARED_LIMIT = re.compile(r"gcl create payments-api --limit (\d+)\s+--slot-decay-per-second (\d+)")


def shared_limit_figures(text: str) -> set[tuple[str, str]]:
    """Every ``prefect gcl create payments-api`` figure (limit, decay) a page gives."""
    return set(SHARED_LIMIT.findall(text))


def test_the_shared_request_limit_has_one_figure_everywhere() -> None:
    """The docs once said 20/20 in the README and 10/10 in operations.md (issue 43): one figure."""
    found = set().union(*(shared_limit_figures((ROOT / page).read_text("utf-8")) for page in PAGES))
    assert found == {("10", "10")}
    two = "gcl create payments-api --limit 20 --slot-decay-per-second 20; "
    two += "gcl create payments-api --limit 10\n--slot-decay-per-second 10"
    assert shared_limit_figures(two) == {("20", "20"), ("10", "10")}
