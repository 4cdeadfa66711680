"""Payout spreadsheet intake: read an xlsx/csv payout sheet, validate every row, write the template/report.

See docs/intake.md for the accepted columns, the rules and the safety limits.
"""

from .models import IntakeError, IntakeResult, PayoutRow, RowIssue
from .options import IntakeOptions
from .reading import read_payout_sheet, read_raw_sheet
from .report import write_validation_report
from .template import write_template

__all__ = [
    "IntakeError",
    "IntakeOptions",
    "IntakeResult",
    "PayoutRow",
    "RowIssue",
    "read_payout_sheet",
    "read_raw_sheet",
    "write_template",
    "write_validation_report",
]
