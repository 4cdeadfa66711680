"""What every run's typed summary holds (its label, outcome, notes, report files) and the exit code and lines
that follow from it; each flow family extends it (`tasks.payouts.run_summary`, `flows.summaries`).

A summary is a model from the run's first phase to its end; JSON only at the edges (``as_json``: the CLI's
``--json``, the reports, the artifacts, the payops database), in the order its fields were written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from payops.connectors.payments.failure_words import failure_words
from payops.tasks.runtime.run_outcomes import Outcome
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_NOT_APPROVED = 0, 1, 2, 3


class RunSummary(BaseModel):
    """What every run reports: its label, outcome, notes and report files."""

    model_config = ConfigDict(extra="forbid")

    #: outcome → exit code; any other outcome exits 1.
    EXIT_CODES: ClassVar[dict[str, int]] = {
        Outcome.COMPLETED: EXIT_OK,
        Outcome.DRY_RUN: EXIT_OK,
        Outcome.INVALID_INPUT: EXIT_INVALID,
        Outcome.PREFLIGHT_FAILED: EXIT_INVALID,
        Outcome.NOT_APPROVED: EXIT_NOT_APPROVED,
    }

    label: str | None = None
    outcome: Outcome | None = None
    notes: list[str] = Field(default_factory=list)
    report_files: dict[str, str] | None = None

    #: the JSON fields' order when none was read: the order the family declares them (set for each family)
    JSON_ORDER: ClassVar[tuple[str, ...]] = ()
    #: fields whose values are JSON already (lists of typed plain dicts), handed over by ``as_json`` as they
    #: are, not copied: a million-row payout run's 10,000 attention rows would be copied at every dump
    JSON_AS_IS: ClassVar[frozenset[str]] = frozenset()
    #: the order the summary's keys were read in: ``as_json`` keeps it for a summary read back from JSON
    _written: list[str] = PrivateAttr(default_factory=list)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A family's ``JSON_ORDER``: the fields its classes declare, the base's first, each where it is
        first declared (JSON names: ``from_`` is ``from``)."""
        super().__pydantic_init_subclass__(**kwargs)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            if isinstance(klass, type) and issubclass(klass, RunSummary) and klass is not RunSummary:
                names += [n for n in vars(klass).get("__annotations__", {}) if n in cls.model_fields]
        cls.JSON_ORDER = tuple(dict.fromkeys(cls.model_fields[n].alias or n for n in names))

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, Mapping) and isinstance(model, RunSummary):
            model._written = [str(k) for k in data]
        return model

    def __getitem__(self, key: str) -> Any:
        """A documented JSON field by name (``summary["outcome"]``), as ``--json`` prints it."""
        name = next((n for n, f in type(self).model_fields.items() if (f.alias or n) == key), key)
        dumped = self.model_dump(by_alias=True, exclude_unset=True, include={name})
        return dumped[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def as_json(self) -> dict[str, Any]:
        """The documented JSON fields (docs/runs.md) set in this run, in the order they were read (a summary
        read back from JSON, or the keywords it was made with), then in the family's ``JSON_ORDER``."""
        as_is = self.JSON_AS_IS & self.model_fields_set
        dumped = self.model_dump(by_alias=True, exclude_unset=True, exclude=set(as_is) or None)
        fields = type(self).model_fields
        dumped |= {fields[n].alias or n: getattr(self, n) for n in as_is}
        written = [(fields[k].alias or k) if k in fields else k for k in self._written]  # `from_` → `from`
        order = [k for k in dict.fromkeys([*written, *self.JSON_ORDER]) if k in dumped]
        return {k: dumped[k] for k in [*order, *(k for k in dumped if k not in order)]}

    def note(self, line: str) -> None:
        """Add a note a person should read."""
        self.notes = [*self.notes, line]

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this outcome."""
        return self.EXIT_CODES.get(self.outcome or "", EXIT_ERROR)

    def lines(self) -> list[str]:
        """The lines a person reads at the end of the run."""
        return [f"{self.label}: {self.outcome}", *self.closing_lines()]

    def closing_lines(self) -> list[str]:
        """The lines every summary ends with: notes, then the report files written."""
        lines = [f"  note: {note}" for note in self.notes]
        lines += [f"  report {kind}: {path}" for kind, path in (self.report_files or {}).items()]
        return lines

    def text(self) -> str:
        """:meth:`lines` as one text."""
        return "\n".join(self.lines())


class RowProblem(BaseModel):
    """A problem of one row (or, ``row`` None, of the whole file): where, and what."""

    model_config = ConfigDict(extra="forbid")

    row: int | None = None
    column: str | None = None
    message: str


class SheetRunSummary(RunSummary):
    """What the summary of a sheet-driven run (payouts, utility purchases) starts with: the sheet, and its
    rows read, valid and invalid with the problems found."""

    label: str | None = None
    source: str | None = None
    outcome: Outcome | None = None
    rows_total: int = 0
    rows_valid: int = 0
    rows_invalid: int = 0
    errors: list[RowProblem] = Field(default_factory=list)
    warnings: list[RowProblem] = Field(default_factory=list)


def row_error_lines(errors: Sequence[RowProblem], *, file_level: bool) -> list[str]:
    """The first 20 row problems as lines, and how many more there are."""
    lines = []
    for e in errors[:20]:
        where = f"row {e.row}, column {e.column}"
        if file_level and e.row is None:
            where = "file"
        lines.append(f"  {where}: {e.message}")
    if len(errors) > 20:
        lines.append(f"  ... and {len(errors) - 20} more errors (see the validation report)")
    return lines


def in_words(title: str, counts: Mapping[Any, int]) -> list[str]:
    """``title: n``, then one line per code: how many, what happened and the next step, in words (the codes
    stay in the JSON summary)."""
    lines = [f"  {title}: {sum(counts.values())}"]
    for code, n in sorted(counts.items(), key=lambda item: -item[1]):
        words, next_step = failure_words(None if code is None else str(code))
        lines.append(f"    {n} × {words} Next: {next_step}")
    return lines
