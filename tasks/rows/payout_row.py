"""A validated payout row and a problem located in the sheet (what intake yields, every phase reads)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from payops.connectors.payments.models import REFERENCE_PATTERN
from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class RowIssue:
    """One problem (or warning) located in the sheet.

    ``row`` is the row number the user sees (xlsx: sheet row, header usually row 1; csv: line number),
    ``column`` is the header text as written in the sheet, ``value`` the cell text (truncated when long).
    """

    row: int
    column: str
    value: str
    message: str


class PayoutRow(BaseModel):
    """A validated payout line. Built with ``model_construct`` after validation (see validation.py)."""

    model_config = ConfigDict(frozen=True)

    row: int = Field(ge=1)
    reference: str | None = Field(default=None, pattern=REFERENCE_PATTERN)
    amount: Decimal = Field(gt=0, decimal_places=2)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    provider: str = Field(min_length=1)
    destination_type: str = Field(pattern=r"^(msisdn|account|card)$")
    destination: str = Field(min_length=1)
    payee_name: str | None = None
    note: str | None = Field(default=None, max_length=50)
    extra: dict[str, str] = Field(default_factory=dict)
