"""Every run summary is typed to its leaves: no field of any family, or of a model nested in one, is `Any`
(issue 44: JSON only at the edges; docs/runs.md lists the fields)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from typing import Any

import payops.flows.summaries  # noqa: F401  (declares the flows' families)
import payops.tasks.payouts.run_summary  # noqa: F401  (declares the payout family)
import typing_extensions
from payops.tasks.runtime.run_summary import RunSummary
from pydantic import BaseModel
from typing_extensions import TypedDict


def _families(base: type[RunSummary] = RunSummary) -> Iterator[type[RunSummary]]:
    for klass in base.__subclasses__():
        yield klass
        yield from _families(klass)


def _models_in(annotation: Any) -> Iterator[type]:
    """The models and typed dicts an annotation names, at any depth."""
    typed_dict = typing_extensions.is_typeddict(annotation)
    if typed_dict or (inspect.isclass(annotation) and issubclass(annotation, BaseModel)):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _fields(model: type) -> dict[str, Any]:
    if typing_extensions.is_typeddict(model):
        return typing.get_type_hints(model)
    return {name: field.annotation for name, field in model.model_fields.items()}  # type: ignore[attr-defined]


def _mentions_any(annotation: Any) -> bool:
    return annotation is Any or any(_mentions_any(a) for a in typing.get_args(annotation))


def untyped_fields(model: type, seen: set[type] | None = None) -> list[str]:
    """``Model.field`` for every field of ``model`` and the models (or typed dicts) nested in it whose type
    holds `Any`."""
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, annotation in _fields(model).items():
        if _mentions_any(annotation):
            found.append(f"{model.__name__}.{name}")
        for nested in _models_in(annotation):
            found += untyped_fields(nested, seen)
    return found


def test_the_families_are_found() -> None:
    names = {k.__name__ for k in _families()}
    assert {
        "PayoutRunSummary",
        "SheetCheckSummary",
        "SettlementRunSummary",
        "ReconciliationSummary",
    } <= names, names


def test_no_summary_field_is_any() -> None:
    assert [f for k in _families() for f in untyped_fields(k)] == []


def test_the_check_finds_an_untyped_field_however_deep() -> None:
    class Inner(BaseModel):
        figures: dict[str, Any]

    class Row(TypedDict):
        cells: list[Any]

    class Outer(BaseModel):
        fine: int
        inner: list[Inner] | None = None
        rows: list[Row] = []

    assert untyped_fields(Outer) == ["Inner.figures", "Row.cells"]
