"""Intake settings: limits, defaults and the providers the sheet may name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_PROVIDERS: frozenset[str] = frozenset(
    {"mtn", "telecel", "airteltigo", "calbank", "gcb", "ecobank", "card"}
)

# docs/contract.md: mobile money providers pay to an msisdn, banks to an account, card to a card reference.
DEFAULT_PROVIDER_DESTINATION_TYPES: dict[str, str] = {
    "mtn": "msisdn",
    "telecel": "msisdn",
    "airteltigo": "msisdn",
    "calbank": "account",
    "gcb": "account",
    "ecobank": "account",
    "card": "card",
}


class IntakeOptions(BaseModel):
    """Limits and defaults for :func:`read_payout_sheet`."""

    model_config = ConfigDict(frozen=True)

    default_country_code: str = Field(default="233", pattern=r"^[1-9]\d{0,2}$")
    max_bytes: int = Field(default=50 * 1024 * 1024, gt=0)
    max_rows: int = Field(default=200_000, gt=0)
    known_providers: frozenset[str] = DEFAULT_PROVIDERS
    provider_destination_types: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_PROVIDER_DESTINATION_TYPES)
    )
    known_currencies: frozenset[str] = frozenset({"GHS"})
    """Currencies accepted; an empty set accepts any ``^[A-Z]{3}$`` code."""
    default_currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    column_map: dict[str, str] = Field(default_factory=dict)
    """Explicit ``{header: field}`` mapping, before the header aliases (`tasks.intake.columns`)."""
    max_uncompressed_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    """Sum of the xlsx zip members' uncompressed sizes (zip bomb guard)."""
    max_compression_ratio: float = Field(default=200.0, gt=1)
    """Refuse an xlsx member larger than 1 MiB that inflates more than this (zip bomb guard)."""
    max_zip_members: int = Field(default=2_000, gt=0)
    max_cell_chars: int = Field(default=1_000, gt=0)
    max_columns: int = Field(default=200, gt=0)
    max_cells: int = Field(default=10_000_000, gt=0)
    """Largest sheet extent (rows × columns from A1 to the farthest cell, declared or written) handed to the
    parser, which allocates the whole rectangle (dimension bomb guard)."""
    max_sheets: int = Field(default=250, gt=0)
    max_shared_strings: int = Field(default=10_000_000, gt=0)
    """Shared strings declared or present (the parser reserves room for the declared count)."""
    max_xml_depth: int = Field(default=256, gt=0)
    """Element nesting (Excel writes at most ~10 levels); measured at 4 KiB steps, see safety.py."""
    parser_memory_bytes: int = Field(default=2 * 1024 * 1024 * 1024, gt=0)
    """Address-space limit of the parser child (``RLIMIT_AS``)."""
    parser_cpu_seconds: int = Field(default=60, gt=0)
    """CPU-time limit of the parser child (``RLIMIT_CPU``)."""
    parser_timeout_s: float = Field(default=120.0, gt=0)
    """Wall-clock limit of the parser child."""
    max_parser_output_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    """Most the parser child may send back (the cells as text)."""

    @field_validator("known_providers", mode="after")
    @classmethod
    def _lower_providers(cls, value: frozenset[str]) -> frozenset[str]:
        return frozenset(p.strip().lower() for p in value)
