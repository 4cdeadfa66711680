"""The `payops` app as data (every command path, its options and arguments) and the checks of a page that
documents it: docs/cli.md must have every command and option, and no page may name one the app lacks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import typer

from tests.docs.markdown import code_texts, sections, spans, table_rows

WORD = re.compile(r"^[a-z][a-z-]*$")
OPTION = re.compile(r"--[a-z][a-z0-9-]*")
MENTION = re.compile(r"(?<![\w./-])payops(?=\s|$|`)")
#: what may stand before a command a reader types: nothing, a shell separator, environment assignments
COMMAND_START = re.compile(r"(^|[;&|`($]\s*)([A-Z_][A-Z0-9_]*=\S*\s+)*$")


@dataclass(frozen=True)
class Command:
    """One command of the app as its --help shows it (hidden commands and options left out)."""

    path: tuple[str, ...]
    options: frozenset[str]
    arguments: tuple[str, ...]
    subcommands: frozenset[str]
    click: Any

    @property
    def name(self) -> str:
        return " ".join(("payops", *self.path))


def commands() -> dict[tuple[str, ...], Command]:
    """Every visible command path of the app, the root ``()`` and the groups included."""
    from payops.deployments.cli import app

    found: dict[tuple[str, ...], Command] = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        params = [p for p in cmd.params if not getattr(p, "hidden", False)]
        options = [p for p in params if p.param_type_name == "option"]
        every = getattr(cmd, "commands", None) or {}
        subs = {n: c for n, c in every.items() if not getattr(c, "hidden", False)}
        found[path] = Command(
            path,
            frozenset(o for p in options for o in (*p.opts, *p.secondary_opts)),
            tuple(p.name for p in params if p.param_type_name == "argument"),
            frozenset(subs),
            cmd,
        )
        for name, sub in subs.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


Tree = dict[tuple[str, ...], Command]


def documented(cmd: Command) -> bool:
    """Whether docs/cli.md needs a section for it: a command that runs, or a group with options of its own."""
    return not cmd.subcommands or bool(cmd.options)


def _default_subcommand(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """`payops payouts FILE` runs `payops payouts pay FILE`."""
    from payops.deployments.cli.payouts import DEFAULT_COMMAND

    return ("payouts", DEFAULT_COMMAND) if path == ("payouts",) else None


def mentions(text: str, tree: Tree) -> list[str]:
    """Problems with every `payops ...` a reader could type from `text`: an unknown command, or an option
    the command it follows does not have."""
    problems = []
    for code in code_texts(text):
        starts = [m.start() for m in MENTION.finditer(code) if COMMAND_START.search(code[: m.start()])]
        for start, end in zip(starts, [*starts[1:], len(code)], strict=False):
            shown = code[start:end].strip()
            problems += _mention(shown, shown.split()[1:], tree)
    return problems


def _mention(shown: str, tokens: list[str], tree: Tree) -> list[str]:
    path: tuple[str, ...] = ()
    words = iter(tokens)
    for raw in words:
        token = raw.strip("[]`,;:.()'\"")
        if token.startswith("--"):
            return _options(shown, path, [raw, *words], tree)
        if not WORD.match(token) or not tree[path].subcommands:
            break  # an argument (FILE, LABEL, a path), or prose after a command that takes none
        if token in tree[path].subcommands:
            path = (*path, token)
            continue
        default = _default_subcommand(path)
        if default is None:
            return [f"{shown!r}: payops has no command {' '.join(('payops', *path, token))!r}"]
        path = default
    rest = list(words)
    return _options(shown, _default_subcommand(path) or path, rest, tree) if rest else []


def _options(shown: str, path: tuple[str, ...], tokens: list[str], tree: Tree) -> list[str]:
    problems = []
    allowed = tree[path].options | {"--help"}
    if tree[path].subcommands and (default := _default_subcommand(path)):
        allowed |= tree[default].options
    for token in tokens:
        for option in OPTION.findall(token) if token.lstrip("[`(").startswith("--") else []:
            if option not in allowed:
                problems.append(f"{shown!r}: {tree[path].name} has no option {option}")
    return problems


def heading_command(heading: str) -> tuple[tuple[str, ...], str] | None:
    """The command path a docs/cli.md heading documents (its first code span starting with payops)."""
    for span in spans(heading):
        tokens = span.split()
        if tokens[:1] != ["payops"]:
            continue
        path = []
        for token in tokens[1:]:
            word = token.strip("[]")
            if not WORD.match(word):
                break
            path.append(word)
        return tuple(path), span
    return None


def reference_problems(text: str, tree: Tree) -> list[str]:
    """docs/cli.md against the app: a section per command, naming its arguments, an option table with every
    option it has and none it lacks; no section for a command the app lacks."""
    problems, seen = [], set()
    for sec in sections(text):
        found = heading_command(sec.heading)
        if found is None:
            continue
        path, span = found
        if path not in tree:
            problems.append(f"section {span!r}: payops has no command {' '.join(('payops', *path))!r}")
            continue
        seen.add(path)
        cmd = tree[path]
        for argument in cmd.arguments:
            if argument.upper() not in span:
                problems.append(f"section {span!r}: argument {argument.upper()} not shown")
        listed = {o for row in table_rows(sec.body) for o in OPTION.findall(row[0])}
        for option in sorted(cmd.options - listed):
            problems.append(f"section {span!r}: option {option} missing from its table")
        for option in sorted(listed - cmd.options):
            problems.append(f"section {span!r}: {cmd.name} has no option {option}")
    for path, cmd in sorted(tree.items()):
        if documented(cmd) and path not in seen:
            problems.append(f"no section for {cmd.name}")
    return problems
