"""docs/runs.md against the code: the state table against `flows.outcomes.end_run` and the summaries' exit
codes, the summary field tables against `flows.summaries` and the keys the payout run writes."""

from __future__ import annotations

import re

import payops.flows.outcomes as outcomes
from payops.flows import summaries
from payops.flows.summaries import SettlementRunSummary
from payops.tasks.payouts import run_summary as payout_summary
from payops.tasks.payouts.run_summary import Decision, PayoutRunSummary
from payops.tasks.reports.attention import KINDS
from payops.tasks.runtime.run_summary import RunSummary

from tests.docs.markdown import read, section, spans, table_rows
from tests.docs.summary_keys import payout_summary_keys, written_keys

PAGE = read("docs/runs.md")

#: one summary per row of the state table, by its state name: what the table says must be what they give
SAMPLES: dict[str, list[RunSummary]] = {
    "Completed": [PayoutRunSummary(outcome="completed", payouts_by_status={"delivered": 2})],
    "Completed with failures": [PayoutRunSummary(outcome="completed", payouts_by_status={"failed": 1})],
    "Dry run": [PayoutRunSummary(outcome="dry_run")],
    "Rejected": [PayoutRunSummary(outcome="not_approved", decision=Decision(kind="rejected", by="ama"))],
    "Not approved": [
        PayoutRunSummary(outcome="not_approved", decision=Decision(kind="not_approved", reason="timeout"))
    ],
    "Refused": [PayoutRunSummary(outcome="invalid_input"), PayoutRunSummary(outcome="preflight_failed")],
    "Incomplete": [SettlementRunSummary(outcome="incomplete")],
    "Failed": [SettlementRunSummary(outcome="policy_alert")],
}


def _names(cell: str) -> list[str]:
    return [s for s in spans(cell) if re.fullmatch(r"[a-z_]+", s)]


def state_rows(page: str) -> dict[str, tuple[list[str], str, int]]:
    """State name → (outcomes, state type, exit code), from the page's state table."""
    rows = table_rows(section(page, "Outcomes, states and exit codes").body)
    return {name.strip("`"): (_names(outcome), kind, int(code)) for outcome, _, kind, name, code in rows}


def state_problems(page: str) -> list[str]:
    """Rows of the state table that are not what `end_run` and the summaries' exit codes give."""
    rows, problems = state_rows(page), []
    if set(rows) != set(SAMPLES):
        problems.append(f"state names {sorted(rows)}, the code's {sorted(SAMPLES)}")
    for name, (listed, kind, code) in rows.items():
        if sorted(listed) != sorted({s.outcome for s in SAMPLES.get(name, [])}):
            problems.append(f"{name}: outcomes {listed}")
        for summary in SAMPLES.get(name, []):
            state = outcomes.end_run(summary)
            actual = (state.type.value.title(), state.name, summary.exit_code)
            if actual != (kind, name, code):
                problems.append(f"{summary.outcome}: the page says {(kind, name, code)}, the code {actual}")
    return problems


def test_every_state_row_is_what_end_run_and_the_exit_code_give() -> None:
    assert state_problems(PAGE) == []


def test_every_state_name_and_outcome_of_the_code_is_in_the_table() -> None:
    rows = state_rows(PAGE)
    names = {v for k, v in vars(outcomes).items() if k.isupper() and isinstance(v, str)}
    assert names - {"Failed"} <= set(rows), "a state name of flows/outcomes.py is not in docs/runs.md"
    documented = {o for listed, _, _ in rows.values() for o in listed}
    families = [
        c
        for module in (summaries, payout_summary)
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, RunSummary)
    ]
    exits = {o for family in families for o in family.EXIT_CODES} - {"valid"}  # `payops check`, said below
    assert exits <= documented


def _json_fields(model: type[RunSummary], *, own: bool) -> set[str]:
    fields = {
        info.alias or name
        for name, info in model.model_fields.items()
        if not info.exclude and (not own or name not in RunSummary.model_fields)
    }
    return fields


def payout_fields(page: str) -> set[str]:
    rows = table_rows(section(page, "The run summary").body)
    return {name for row in rows for name in _names(row[0])}


def test_the_payout_summary_table_has_every_field_and_written_key_and_nothing_else() -> None:
    documented = payout_fields(PAGE)
    excluded = {n for n, i in PayoutRunSummary.model_fields.items() if i.exclude}
    expected = _json_fields(PayoutRunSummary, own=False) | (payout_summary_keys() - excluded)
    assert sorted(expected - documented) == [], "written or typed, but not in docs/runs.md"
    assert sorted(documented - expected) == [], "in docs/runs.md, but neither typed nor written"


def test_the_attention_kinds_are_those_of_tasks_attention() -> None:
    row = next(r for r in table_rows(section(PAGE, "The run summary").body) if "`attention_rows`" in r[0])
    assert set(KINDS) <= set(spans(row[1]))


def test_every_other_family_lists_its_typed_fields() -> None:
    rows = table_rows(section(PAGE, "Other flows' summaries").body)
    listed = {}
    for _, model, fields in rows:
        listed[model.strip("`")] = {s for s in spans(fields) if re.fullmatch(r"[a-z_]+", s)}
    families = {
        name: c
        for module in (summaries, payout_summary)
        for name, c in vars(module).items()
        if isinstance(c, type)
        and issubclass(c, RunSummary)
        and c.__module__ == module.__name__
        and c is not PayoutRunSummary
    }
    assert set(listed) == set(families)
    for name, model in families.items():
        if issubclass(model, PayoutRunSummary):
            assert _json_fields(model, own=True) == _json_fields(PayoutRunSummary, own=True), name
            assert not listed[name], f"{name}: the table says 'those of the payout run above'"
        else:
            assert listed[name] == _json_fields(model, own=True), name


# The checks themselves.


def test_a_state_table_that_lies_is_caught() -> None:
    wrong = PAGE.replace("| Cancelled | `Rejected` | 3 |", "| Failed | `Rejected` | 1 |")
    assert state_problems(wrong) == [
        "not_approved: the page says ('Failed', 'Rejected', 1), the code ('Cancelled', 'Rejected', 3)"
    ]
    gone = PAGE.replace("| `dry_run` |", "| `dry` |")
    assert state_problems(gone) == ["Dry run: outcomes ['dry']"]


def test_the_key_reader_finds_every_way_a_key_is_written() -> None:
    source = (
        "def f(run, summary):\n"
        "    summary['a'] = 1\n"
        "    run.summary['b'] = 2\n"
        "    summary.update({'c': 3, **x})\n"
        "    summary.setdefault('d', []).append(1)\n"
        "    other['e'] = 5\n"
        "def summary_head():\n"
        "    return {'f': 1}\n"
    )
    assert written_keys(source) == {"a", "b", "c", "d", "f"}


def test_a_written_key_missing_from_the_table_is_caught() -> None:
    without = PAGE.replace("| `waiting_statuses` |", "| `waiting` |")
    assert "waiting_statuses" in payout_summary_keys() and "waiting_statuses" not in payout_fields(without)
