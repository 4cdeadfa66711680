"""Party lookups: the holder name behind a mobile money number (deterministic test values)."""

from __future__ import annotations

import hashlib

from ..errors import ApiError, invalid, not_found
from ..state import PROVIDERS

FIRST_NAMES = (
    "Ama",
    "Kwame",
    "Akosua",
    "Kofi",
    "Abena",
    "Yaw",
    "Efua",
    "Kwabena",
    "Adwoa",
    "Kwaku",
    "Afua",
    "Kojo",
    "Esi",
    "Kwasi",
    "Yaa",
    "Fiifi",
    "Nana",
    "Ekow",
    "Akua",
    "Selorm",
)
SURNAMES = (
    "Mensah",
    "Owusu",
    "Boateng",
    "Asante",
    "Osei",
    "Agyeman",
    "Addo",
    "Appiah",
    "Acheampong",
    "Darko",
    "Ofori",
    "Amoah",
    "Quaye",
    "Tetteh",
    "Annan",
    "Sarpong",
    "Frimpong",
    "Ansah",
    "Nkrumah",
    "Adjei",
)
#: msisdn ending → refusal.
TEST_VALUES: dict[str, ApiError] = {
    "0404": ApiError(404, "not_found", "no mobile money account has that number"),
    "0502": ApiError(502, "provider_error", "provider refused the lookup"),
    "0504": ApiError(504, "provider_timeout", "provider did not answer the lookup in time"),
}


def holder_name(msisdn: str) -> str:
    """A Ghanaian name derived from the number (same number → same name)."""
    digest = hashlib.sha256(msisdn.lstrip("+").encode()).digest()
    return f"{FIRST_NAMES[digest[0] % len(FIRST_NAMES)]} {SURNAMES[digest[1] % len(SURNAMES)]}"


def lookup(providers: set[str], provider: str, msisdn: str) -> dict[str, str]:
    """``GET /v1/party-lookups``: ``{provider, msisdn, name}`` or the test value's refusal."""
    meta = PROVIDERS.get(provider)
    if meta is None or provider not in providers:
        raise invalid("provider", f"unknown provider {provider!r}")
    if meta["type"] != "mobile_money":
        raise invalid("provider", f"{provider} is not a mobile money provider")
    err = TEST_VALUES.get(msisdn[-4:])
    if err is not None:
        if err.status == 404:
            raise not_found("mobile money number")
        raise ApiError(err.status, err.code, err.message)
    return {"provider": provider, "msisdn": msisdn, "name": holder_name(msisdn)}
