"""Phone numbers (destination type ``msisdn``) → international format without the plus."""

from __future__ import annotations

import re

from .amounts import CellError
from .cells import shorten

NATIONAL_NUMBER_LENGTHS: dict[str, int] = {"233": 9}
"""Digits after the country code, where known (Ghana: 9). Other codes accept 6 to 12."""

# [0-9], not \d: \d also matches the digits of other scripts, and only ASCII digits may reach the API.
_SCIENTIFIC = re.compile(r"^[+-]?[0-9]+(?:[.,][0-9]+)?[eE][+-]?[0-9]+$")
_FLOAT_ZERO = re.compile(r"^([0-9]+)\.0+$")
_SEPARATORS = re.compile(r"[\s\-./()]")
_LOCAL_GH = re.compile(r"0[0-9]{9}\Z")


def _national_ok(national: str, country_code: str) -> bool:
    expected = NATIONAL_NUMBER_LENGTHS.get(country_code)
    if expected is not None:
        return len(national) == expected
    return 6 <= len(national) <= 12


def normalise_msisdn(text: str, country_code: str = "233") -> str:
    """``"024 123 4567"``, ``"+233 24 123 4567"``, ``"0241234567"`` → ``"233241234567"``.

    Refuses numbers Excel damaged: scientific notation (``2.33241E+11``) and a dropped leading zero
    (``241234567``), since a guessed number could pay the wrong person.
    """
    if not text:
        raise CellError("the destination is required")
    if _LOCAL_GH.match(text) and country_code == "233":  # fast path for the common "0241234567"
        return "233" + text[1:]
    if _SCIENTIFIC.match(text):
        raise CellError(
            f"Excel turned the phone number into scientific notation ({text}); format the column as Text "
            "and type the numbers again"
        )
    zero_float = _FLOAT_ZERO.match(text)
    if zero_float:
        text = zero_float.group(1)
    international = text.startswith("+")
    digits = _SEPARATORS.sub("", text[1:] if international else text)
    if not (digits.isascii() and digits.isdigit()):
        raise CellError(f"{shorten(text)!r} is not a phone number")
    if not international and digits.startswith("00"):
        international, digits = True, digits[2:]
    cc = country_code
    if international:
        if digits.startswith(cc):
            if _national_ok(digits[len(cc) :], cc):
                return digits
            raise CellError(f"{text!r} has the wrong number of digits for country code +{cc}")
        if 8 <= len(digits) <= 15:
            return digits
        raise CellError(f"{text!r} is not a valid international phone number")
    if digits.startswith("0"):
        if _national_ok(digits[1:], cc):
            return cc + digits[1:]
        raise CellError(f"{text!r} has the wrong number of digits for a phone number")
    if digits.startswith(cc) and _national_ok(digits[len(cc) :], cc):
        return digits
    expected = NATIONAL_NUMBER_LENGTHS.get(cc)
    if expected is not None and len(digits) == expected:
        raise CellError(
            f"Excel dropped the leading zero of {text!r}; format the column as Text and type the number "
            f"with its 0 (or write +{cc}…)"
        )
    raise CellError(
        f"{text!r} is not a valid phone number; write 0XXXXXXXXX, {cc}XXXXXXXXX or +{cc} XX XXX XXXX"
    )
