"""Payout spreadsheet intake: read an xlsx/csv payout sheet, validate every row, write the template/report.

See docs/intake.md for the accepted columns, the rules and the safety limits.

The names below are imported on first use (PEP 562): the parser child (``tasks.intake.parser_child``) starts
a fresh interpreter per sheet and must not pay for pydantic, pandas and openpyxl it never uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import IntakeError
    from .models import IntakeResult
    from .options import IntakeOptions
    from .reading import read_payout_sheet, read_raw_sheet
    from .report import write_validation_report
    from .template import write_template

_WHERE = {
    "IntakeError": ".errors",
    "IntakeOptions": ".options",
    "IntakeResult": ".models",
    "read_payout_sheet": ".reading",
    "read_raw_sheet": ".reading",
    "write_template": ".template",
    "write_validation_report": ".report",
}

__all__ = [
    "IntakeError",
    "IntakeOptions",
    "IntakeResult",
    "read_payout_sheet",
    "read_raw_sheet",
    "write_template",
    "write_validation_report",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value
