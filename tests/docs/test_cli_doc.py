"""docs/cli.md is the full reference of the `payops` app, and no page names a command or option it lacks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.docs.cli_reference import Tree, commands, mentions, reference_problems
from tests.docs.markdown import ROOT, read

DOCS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
PAGES = ["README.md", *DOCS, "sandbox/README.md"]


@pytest.fixture(scope="module")
def tree() -> Tree:
    return commands()


def test_the_reference_has_every_command_and_option_and_nothing_else(tree: Tree) -> None:
    assert reference_problems(read("docs/cli.md"), tree) == []


@pytest.mark.parametrize("page", PAGES)
def test_every_payops_command_a_page_shows_exists(page: str, tree: Tree) -> None:
    assert mentions(read(page), tree) == []


def test_the_tree_is_what_help_shows(tree: Tree) -> None:
    """The commands and options compared above are those `payops ... --help` prints."""
    from payops.deployments.cli import app

    runner = CliRunner()
    for path, cmd in tree.items():
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
        assert shown.exit_code == 0, (cmd.name, shown.output)
        for word in [*cmd.options, *cmd.subcommands]:
            assert word in shown.output, f"{cmd.name} --help does not show {word}"
    assert ("payouts", "retry-failed") in tree and "--settle-window" in tree[("payouts", "pay")].options


# The checks themselves: each problem they exist for is reported.

STALE = """
### `payops payouts [pay] FILE`

| option | meaning |
|---|---|
| `--label LABEL` | the label |
| `--approval-theshold AMOUNT` | misspelt |

### `payops payouts resend LABEL`

Gone.
"""


def test_a_missing_misspelt_or_unknown_entry_is_reported(tree: Tree) -> None:
    problems = reference_problems(STALE, tree)
    pay = "section 'payops payouts [pay] FILE'"
    assert f"{pay}: payops payouts pay has no option --approval-theshold" in problems
    assert f"{pay}: option --dry-run missing from its table" in problems
    assert "section 'payops payouts resend LABEL': payops has no command 'payops payouts resend'" in problems
    assert "no section for payops check" in problems


def test_an_argument_the_heading_does_not_show_is_reported(tree: Tree) -> None:
    problems = reference_problems("### `payops payouts retry-failed`\n", tree)
    assert "section 'payops payouts retry-failed': argument LABEL not shown" in problems


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Run `payops runs list` first.", "payops has no command 'payops runs list'"),
        ("```\npayops payouts FILE --approve-now\n```", "payops payouts pay has no option --approve-now"),
        ("`payops sandbox --port 8800 --seed-file x`", "payops sandbox has no option --seed-file"),
        ("```\npayops check FILE --json   # then payops pay FILE\n```", None),
        ("```\npayops check F; payops reconcile --day D\n```", "payops reconcile has no option --day"),
    ],
)
def test_a_stale_mention_is_reported(text: str, problem: str | None, tree: Tree) -> None:
    found = mentions(text, tree)
    if problem is None:
        assert found == []  # a `# comment` in a code block is prose
    else:
        assert len(found) == 1 and found[0].endswith(problem), found


def test_mentions_of_real_commands_pass(tree: Tree) -> None:
    text = (
        "```\npayops payouts examples/payouts-demo.xlsx --label payroll-2026-12 --dry-run\n"
        "payops payouts retry-failed LABEL --report-dir DIR [--json]\n```\n"
        "Then `payops runs show LABEL --json`, `payops users token ama`, `payops serve`'s server."
    )
    assert mentions(text, tree) == []
