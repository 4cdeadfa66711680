"""Exceptions of the Payments client and the one error map (``error_from_response``).

The class is picked by the spec's ``code`` (and status when a code appears under several statuses), then
by the HTTP status family, then ``APIStatusError``. Unknown codes are tolerated and kept on ``.code``.
Messages never carry secrets or tokens: only status, code, the server's message and the Request-Id.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx

__all__ = [
    "PaymentsError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "UnprocessableEntityError",
    "RateLimitError",
    "InternalServerError",
    "BadGatewayError",
    "ServiceUnavailableError",
    "GatewayTimeoutError",
    "InvalidInputError",
    "TransferRefusedError",
    "UnauthenticatedError",
    "ForbiddenError",
    "EnvironmentMismatchError",
    "TierIneligibleError",
    "LimitExceededError",
    "TransactionLimitExceededError",
    "DailyLimitExceededError",
    "MonthlyLimitExceededError",
    "LimitsMissingError",
    "LimitsUnusableError",
    "BusinessSuspendedError",
    "BusinessDeactivatedError",
    "ResourceNotFoundError",
    "ProductNotFoundError",
    "IdempotencyKeyReusedError",
    "RequestInFlightError",
    "DuplicateReferenceError",
    "ReferenceReusedError",
    "TransferNotHeldError",
    "ResettlementNotAllowedError",
    "SettlementAlreadyRetriedError",
    "ProductNotSellableError",
    "AmountOutOfRangeError",
    "CurrencyNotSupportedError",
    "BeneficiaryInvalidError",
    "FeeUnpriceableError",
    "PolicyMissingProviderError",
    "PolicyNotNettableError",
    "DestinationNotVerifiedError",
    "RateLimitedError",
    "InternalError",
    "UpstreamInternalError",
    "ProviderError",
    "EnvironmentUnknownError",
    "UtilitiesUnavailableError",
    "DestinationVerificationUnavailableError",
    "CheckoutUnavailableError",
    "UpstreamTimeoutError",
    "ProviderTimeoutError",
    "ERROR_CLASSES_BY_CODE",
    "error_from_response",
    "parse_retry_after",
]


def is_transient_status(status: int) -> bool:
    """The one rule of a passing failure: 429 (throttled) or a 5xx (the service failed), which the same
    request may get past later; any other status is the request's own and comes back unchanged."""
    return status == 429 or status >= 500


class PaymentsError(Exception):
    """Base of every error raised by the Payments client."""

    @property
    def transient(self) -> bool:
        """The same request may succeed later (the service was unreachable, throttled or failing)."""
        return False

    retries_spent: bool = False
    """Set by the client: the request was sent as often as its retry budget allows (``max_retries``), so a
    caller must not send it again on top (`tasks.runtime.retries`)."""


class APIConnectionError(PaymentsError):
    """The service could not be reached (DNS, refused connection, reset, protocol error)."""

    @property
    def transient(self) -> bool:
        return True

    def __init__(self, message: str = "connection error", *, method: str = "", path: str = "") -> None:
        self.method = method
        self.path = path
        super().__init__(f"{message} ({method} {path})" if method else message)


class APITimeoutError(APIConnectionError):
    """The request timed out. A POST may or may not have run: repeat it with the same key."""


class APIResponseValidationError(PaymentsError):
    """A 2xx answer did not match the expected model."""

    def __init__(self, message: str, *, status: int, request_id: str | None) -> None:
        self.status = status
        self.request_id = request_id
        super().__init__(f"{message} (status {status}, request_id={request_id})")


class APIStatusError(PaymentsError):
    """A non-2xx answer. Carries ``status``, ``code``, ``message``, ``request_id``, ``retry_after``."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after
        self.method = method
        self.path = path
        super().__init__(self._text())

    @property
    def transient(self) -> bool:
        return is_transient_status(self.status)

    def _text(self) -> str:
        where = f" on {self.method} {self.path}" if self.method else ""
        return f"{self.status} {self.code or '-'}: {self.message}{where} (request_id={self.request_id})"


# Status families ------------------------------------------------------------------------------------
class BadRequestError(APIStatusError):
    """400."""


class AuthenticationError(APIStatusError):
    """401."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404."""


class ConflictError(APIStatusError):
    """409."""


class UnprocessableEntityError(APIStatusError):
    """422."""


class RateLimitError(APIStatusError):
    """429: wait at least ``retry_after`` seconds."""


class InternalServerError(APIStatusError):
    """5xx."""


class BadGatewayError(InternalServerError):
    """502."""


class ServiceUnavailableError(InternalServerError):
    """503."""


class GatewayTimeoutError(InternalServerError):
    """504: a POST may or may not have run; read it back by reference or repeat with the same key."""


# One class per code of the spec's error table ---------------------------------------------------------
class InvalidInputError(BadRequestError):
    """400 invalid_input."""


class TransferRefusedError(BadRequestError):
    """400 transfer_refused: nothing left the wallet."""


class UnauthenticatedError(AuthenticationError):
    """401 unauthenticated."""


class ForbiddenError(PermissionDeniedError):
    """403 forbidden."""


class EnvironmentMismatchError(PermissionDeniedError):
    """403 environment_mismatch."""


class TierIneligibleError(PermissionDeniedError):
    """403 tier_ineligible."""


class LimitExceededError(PermissionDeniedError):
    """Base of the 403 limit codes."""


class TransactionLimitExceededError(LimitExceededError):
    """403 transaction_limit_exceeded."""


class DailyLimitExceededError(LimitExceededError):
    """403 daily_limit_exceeded."""


class MonthlyLimitExceededError(LimitExceededError):
    """403 monthly_limit_exceeded."""


class LimitsMissingError(PermissionDeniedError):
    """403 limits_missing."""


class LimitsUnusableError(PermissionDeniedError):
    """403 limits_unusable."""


class BusinessSuspendedError(PermissionDeniedError):
    """403 business_suspended."""


class BusinessDeactivatedError(PermissionDeniedError):
    """403 business_deactivated."""


class ResourceNotFoundError(NotFoundError):
    """404 not_found."""


class ProductNotFoundError(NotFoundError):
    """404 product_not_found."""


class IdempotencyKeyReusedError(ConflictError):
    """409 idempotency_key_reused."""


class RequestInFlightError(ConflictError):
    """409 request_in_flight: retried shortly by the client."""


class DuplicateReferenceError(ConflictError):
    """409 duplicate_reference."""


class ReferenceReusedError(ConflictError):
    """409 reference_reused."""


class TransferNotHeldError(ConflictError):
    """409 transfer_not_held."""


class ResettlementNotAllowedError(ConflictError):
    """409 resettlement_not_allowed."""


class SettlementAlreadyRetriedError(ConflictError):
    """409 settlement_already_retried."""


class ProductNotSellableError(UnprocessableEntityError):
    """422 product_not_sellable."""


class AmountOutOfRangeError(UnprocessableEntityError):
    """422 amount_out_of_range."""


class CurrencyNotSupportedError(UnprocessableEntityError):
    """422 currency_not_supported."""


class BeneficiaryInvalidError(UnprocessableEntityError):
    """422 beneficiary_invalid."""


class FeeUnpriceableError(UnprocessableEntityError):
    """422 fee_unpriceable."""


class PolicyMissingProviderError(UnprocessableEntityError):
    """422 policy_missing_provider."""


class PolicyNotNettableError(UnprocessableEntityError):
    """422 policy_not_nettable."""


class DestinationNotVerifiedError(UnprocessableEntityError):
    """422 destination_not_verified."""


class RateLimitedError(RateLimitError):
    """429 rate_limited."""


class InternalError(InternalServerError):
    """500 internal."""


class UpstreamInternalError(InternalError, BadGatewayError):
    """502 internal: a service behind the API did not answer usably."""


class ProviderError(BadGatewayError):
    """502 provider_error."""


class EnvironmentUnknownError(ServiceUnavailableError):
    """503 environment_unknown."""


class UtilitiesUnavailableError(ServiceUnavailableError):
    """503 utilities_unavailable."""


class DestinationVerificationUnavailableError(ServiceUnavailableError):
    """503 destination_verification_unavailable."""


class CheckoutUnavailableError(ServiceUnavailableError):
    """503 checkout_unavailable: not retried until the deployment is configured."""


class UpstreamTimeoutError(GatewayTimeoutError):
    """504 upstream_timeout."""


class ProviderTimeoutError(GatewayTimeoutError):
    """504 provider_timeout."""


#: (status, code) → class, for every row of the spec's error table.
ERROR_CLASSES_BY_CODE: dict[tuple[int, str], type[APIStatusError]] = {
    (400, "invalid_input"): InvalidInputError,
    (400, "transfer_refused"): TransferRefusedError,
    (401, "unauthenticated"): UnauthenticatedError,
    (403, "forbidden"): ForbiddenError,
    (403, "environment_mismatch"): EnvironmentMismatchError,
    (403, "tier_ineligible"): TierIneligibleError,
    (403, "transaction_limit_exceeded"): TransactionLimitExceededError,
    (403, "daily_limit_exceeded"): DailyLimitExceededError,
    (403, "monthly_limit_exceeded"): MonthlyLimitExceededError,
    (403, "limits_missing"): LimitsMissingError,
    (403, "limits_unusable"): LimitsUnusableError,
    (403, "business_suspended"): BusinessSuspendedError,
    (403, "business_deactivated"): BusinessDeactivatedError,
    (404, "not_found"): ResourceNotFoundError,
    (404, "product_not_found"): ProductNotFoundError,
    (409, "idempotency_key_reused"): IdempotencyKeyReusedError,
    (409, "request_in_flight"): RequestInFlightError,
    (409, "duplicate_reference"): DuplicateReferenceError,
    (409, "reference_reused"): ReferenceReusedError,
    (409, "transfer_not_held"): TransferNotHeldError,
    (409, "resettlement_not_allowed"): ResettlementNotAllowedError,
    (409, "settlement_already_retried"): SettlementAlreadyRetriedError,
    (422, "product_not_sellable"): ProductNotSellableError,
    (422, "amount_out_of_range"): AmountOutOfRangeError,
    (422, "currency_not_supported"): CurrencyNotSupportedError,
    (422, "beneficiary_invalid"): BeneficiaryInvalidError,
    (422, "fee_unpriceable"): FeeUnpriceableError,
    (422, "policy_missing_provider"): PolicyMissingProviderError,
    (422, "policy_not_nettable"): PolicyNotNettableError,
    (422, "destination_not_verified"): DestinationNotVerifiedError,
    (429, "rate_limited"): RateLimitedError,
    (500, "internal"): InternalError,
    (502, "internal"): UpstreamInternalError,
    (502, "provider_error"): ProviderError,
    (503, "environment_unknown"): EnvironmentUnknownError,
    (503, "utilities_unavailable"): UtilitiesUnavailableError,
    (503, "destination_verification_unavailable"): DestinationVerificationUnavailableError,
    (503, "checkout_unavailable"): CheckoutUnavailableError,
    (504, "upstream_timeout"): UpstreamTimeoutError,
    (504, "provider_timeout"): ProviderTimeoutError,
}

_BY_CODE: dict[str, type[APIStatusError]] = {}
for (_status, _code), _cls in ERROR_CLASSES_BY_CODE.items():
    _BY_CODE.setdefault(_code, _cls)

_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    502: BadGatewayError,
    503: ServiceUnavailableError,
    504: GatewayTimeoutError,
}


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def _error_fields(response: httpx.Response) -> tuple[str | None, str]:
    try:
        body: Any = json.loads(response.content) if response.content else None
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else None
        message = err.get("message") if isinstance(err.get("message"), str) else None
        return code, message or f"HTTP {response.status_code}"
    return None, f"HTTP {response.status_code}"


def error_class_for(status: int, code: str | None) -> type[APIStatusError]:
    """The exception class for a status and code: by (status, code), by code, by status, else generic."""
    if code is not None:
        cls = ERROR_CLASSES_BY_CODE.get((status, code)) or _BY_CODE.get(code)
        if cls is not None:
            return cls
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return InternalServerError
    return APIStatusError


def error_from_response(response: httpx.Response) -> APIStatusError:
    """Build the typed exception for a non-2xx response. Never includes request headers or bodies."""
    code, message = _error_fields(response)
    cls = error_class_for(response.status_code, code)
    try:
        request: httpx.Request | None = response.request
    except RuntimeError:  # a Response built without a request (unit tests)
        request = None
    return cls(
        message,
        status=response.status_code,
        code=code,
        request_id=response.headers.get("Request-Id"),
        retry_after=parse_retry_after(response.headers.get("Retry-After")),
        method=request.method if request is not None else "",
        path=request.url.path if request is not None else "",
    )
