"""Wire models of the Payments Service API (pydantic v2 only; shared by client and emulator).

Python attributes are snake_case; the wire uses camelCase aliases (``populate_by_name``).

* ``model_dump(by_alias=True, mode="json")`` gives the wire body. Optional fields that are ``None`` are
  left out (the spec's "left out" rule); required-but-nullable fields (hosted checkout) stay as ``null``.
  ``to_wire()`` is a shortcut for exactly that.
* Money is ``Decimal`` in Python and a decimal string on the wire (``"12.50"``). Request models accept
  only strings (or ``Decimal`` from Python) for amounts: a JSON number is refused.
* Open enumerations (statuses, categories, outcomes, kinds, event types) are plain ``str`` so unknown
  values parse; the known values are exported as ``frozenset`` constants.
* Response models allow extra fields, so new server fields never break parsing. Request models forbid
  unknown fields.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Context, Decimal, InvalidOperation
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import core_schema

__all__ = [
    # value types
    "Money",
    "RequestMoney",
    "RequestMoneyOrZero",
    "Percent",
    "Reference",
    "Currency",
    "Note",
    # constants
    "REFERENCE_PATTERN",
    "CURRENCY_PATTERN",
    "REQUEST_AMOUNT_PATTERN",
    "MAX_BATCH_ITEMS",
    "COLLECTION_STATUSES",
    "COLLECTION_FINAL_STATUSES",
    "COLLECTION_FAILED_STATUSES",
    "MONEY_MOVED_STATUSES",
    "PAYOUT_STATUSES",
    "PAYOUT_FINAL_STATUSES",
    "PAYOUT_AWAITING_REVIEW_STATUSES",
    "PAYOUT_FAILED_STATUSES",
    "UTILITY_PURCHASE_STATUSES",
    "UTILITY_PURCHASE_FINAL_STATUSES",
    "UTILITY_PURCHASE_AWAITING_STATUSES",
    "UTILITY_PURCHASE_FAILED_STATUSES",
    "TRANSFER_STATUSES",
    "TRANSFER_FINAL_STATUSES",
    "SETTLEMENT_PAYMENT_FINAL_STATUSES",
    "CHECKOUT_STATUSES",
    "SETTLEMENT_STATUSES",
    "SETTLEMENT_OUTCOMES",
    "SETTLEMENT_STATUS_VALUES",
    "RECONCILIATION_STATUSES",
    "TRANSACTION_KINDS",
    "UTILITY_CATEGORIES",
    "EVENT_TYPES",
    "FEE_BEARERS",
    "DESTINATION_TYPES",
    # base
    "WireModel",
    "ResponseModel",
    "RequestModel",
    # resources
    "LineageLink",
    "Reconciliation",
    "MovementRecord",
    "Collection",
    "Payout",
    "Transaction",
    "CheckoutAttempt",
    "HostedCheckout",
    "UtilityProduct",
    "PurchaseProduct",
    "PurchaseBeneficiary",
    "PurchasePayer",
    "PurchaseFunding",
    "UtilityPurchase",
    "UtilityFeeQuote",
    "Transfer",
    "SettlementRun",
    "SettlementRunEventData",
    "LimitUsage",
    "LimitPeriod",
    "CurrencyLimits",
    "WalletAccount",
    "ErrorDetail",
    "ErrorBody",
    "BatchResultItem",
    "PayoutBatchResult",
    "WebhookEnvelope",
    "FeeQuote",
    "PaymentMethod",
    "PartyLookup",
    "Recipient",
    "SettlementDestination",
    "SettlementPolicy",
    "TokenResponse",
    # lists and pages
    "CheckoutPage",
    "SettlementPage",
    "TransactionPage",
    "EventPage",
    "UtilityProductList",
    "WalletAccountList",
    "CurrencyLimitsList",
    "PaymentMethodList",
    # requests
    "Destination",
    "Payer",
    "PayoutRequest",
    "PayoutBatchRequest",
    "CollectionRequest",
    "CheckoutCreate",
    "CheckoutCancel",
    "Beneficiary",
    "FundingPayer",
    "Funding",
    "UtilityPurchaseRequest",
    "TransferRequest",
    "SettlementRequest",
    "ResettlementRequest",
    "SettlementDestinationRequest",
    "SettlementPolicyRequest",
]

# --------------------------------------------------------------------------------------------------
# Patterns, limits and known values of open enumerations
# --------------------------------------------------------------------------------------------------

REFERENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
REQUEST_AMOUNT_PATTERN = r"^\d+(\.\d{1,2})?$"
RESPONSE_AMOUNT_PATTERN = r"^-?\d+\.\d{2}$"
MAX_BATCH_ITEMS = 100
MAX_NOTE_LENGTH = 50
MAX_HANDLE_LENGTH = 40

COLLECTION_STATUSES = frozenset(
    {"accepted", "dispatched", "in_review", "held", "settled", "failed", "expired"}
)
COLLECTION_FINAL_STATUSES = frozenset({"settled", "failed", "expired"})
#: Final statuses of a collection that brought no money (its inbound limit usage is given back).
COLLECTION_FAILED_STATUSES = frozenset({"failed", "expired"})
PAYOUT_STATUSES = frozenset(
    {"accepted", "dispatching", "in_review", "held", "delivered", "failed", "refunded"}
)
#: Statuses after which a payout normally does not move (``delivered`` can still become ``refunded``).
PAYOUT_FINAL_STATUSES = frozenset({"delivered", "failed", "refunded"})
#: Final statuses in which the payee did not get the money: the row is paid again by a retry.
PAYOUT_FAILED_STATUSES = frozenset({"failed", "refunded"})
#: Statuses in which a payout waits for a person at the provider or the service (review, hold): it may stay
#: there for hours, so a run does not wait for it past its settle window.
PAYOUT_AWAITING_REVIEW_STATUSES = frozenset({"in_review", "held"})
UTILITY_PURCHASE_STATUSES = frozenset(
    {
        "accepted",
        "awaiting_payment",
        "vending",
        "delivered",
        "failed",
        "refunding",
        "refunded",
        "refund_failed",
        "outcome_unknown",
    }
)
UTILITY_PURCHASE_FINAL_STATUSES = frozenset({"delivered", "failed", "refunded"})
#: Final statuses of a purchase that did not deliver (the money came back or never left).
UTILITY_PURCHASE_FAILED_STATUSES = frozenset({"failed", "refunded"})
#: Statuses a purchase can stay in until the service resolves it (never bought again meanwhile).
UTILITY_PURCHASE_AWAITING_STATUSES = frozenset({"outcome_unknown", "refund_failed"})
TRANSFER_STATUSES = frozenset({"pending", "held", "completed", "declined", "failed"})
TRANSFER_FINAL_STATUSES = frozenset({"completed", "declined", "failed"})
#: Statuses of a settlement run's payments (transaction kind ``settlement``) after which they do not move.
SETTLEMENT_PAYMENT_FINAL_STATUSES = frozenset({"settled", "failed"})
#: Statuses, of any kind of movement, at which its money has left or entered the wallet (a refund with a
#: recorded reversal keeps its payout's debit: the reversal carries the credit).
MONEY_MOVED_STATUSES = frozenset({"delivered", "settled", "completed"})
CHECKOUT_STATUSES = frozenset({"open", "paid", "expired", "cancelled"})
SETTLEMENT_STATUSES = frozenset({"running", "completed"})
SETTLEMENT_OUTCOMES = frozenset({"settled", "failed_partial", "failed_all"})
SETTLEMENT_STATUS_VALUES = frozenset({"not_eligible", "eligible", "claimed", "settled"})
RECONCILIATION_STATUSES = frozenset({"unchecked", "matched", "mismatched"})
TRANSACTION_KINDS = frozenset({"collection", "payout", "settlement", "utility", "wallet_transfer"})
UTILITY_CATEGORIES = frozenset({"airtime", "data"})
FEE_BEARERS = frozenset({"initiator", "non_initiator"})
DESTINATION_TYPES = frozenset({"msisdn", "account", "card"})
EVENT_TYPES = frozenset(
    {
        "collection.accepted",
        "collection.status_changed",
        "payout.accepted",
        "payout.status_changed",
        "utility_purchase.accepted",
        "utility_purchase.status_changed",
        "settlement.status_changed",
        "transfer.status_changed",
        "transfer.received",
        "webhook.test",
    }
)

_REQUEST_AMOUNT_RE = re.compile(REQUEST_AMOUNT_PATTERN)
_CENT = Decimal("0.01")

# --------------------------------------------------------------------------------------------------
# Money and other value types
# --------------------------------------------------------------------------------------------------


def format_money(value: Decimal) -> str:
    """Decimal → wire string: at least two decimals (``12.5`` → ``"12.50"``), never exponent notation."""
    digits, exponent = value.as_tuple()[1:]
    if isinstance(exponent, int) and exponent >= -2:
        # Precision enough for any length (the default 28 digits fail on a 27-digit amount with cents).
        value = value.quantize(_CENT, context=Context(prec=len(digits) + max(exponent, 0) + 3))
    return format(value, "f")


def _parse_response_money(value: object) -> Decimal:
    """Lenient parse for responses: decimal strings (and ints/Decimals), never floats."""
    if isinstance(value, bool | float):
        raise ValueError("money must be a decimal string, not a floating point number")
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, str):
        try:
            result = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"not a decimal amount: {value!r}") from None
    else:
        raise ValueError("money must be a decimal string")
    if not result.is_finite():
        raise ValueError("money must be finite")
    return result


def _parse_request_money(value: object, *, allow_zero: bool = False) -> Decimal:
    """Strict parse for requests: a decimal string with at most two decimals (or a Decimal in Python).

    A JSON number (int or float) is refused: the spec says amounts are never JSON numbers.
    """
    if isinstance(value, str):
        if not _REQUEST_AMOUNT_RE.fullmatch(value):
            raise ValueError("amount must be a decimal string like '12.50' (at most two decimals)")
        result = Decimal(value)
    elif isinstance(value, Decimal):
        if not value.is_finite() or value.is_signed() and value != 0:
            raise ValueError("amount must be a finite, non-negative decimal")
        exponent = value.normalize().as_tuple().exponent
        if not isinstance(exponent, int) or exponent < -2:
            raise ValueError("amount must have at most two decimals")
        result = value
    else:
        raise ValueError("amount must be a decimal string (e.g. '12.50'), not a JSON number")
    if result < 0 or (result == 0 and not allow_zero):
        raise ValueError("amount must be positive")
    return result


def _parse_request_money_or_zero(value: object) -> Decimal:
    return _parse_request_money(value, allow_zero=True)


def _parse_percent(value: object) -> Decimal:
    if isinstance(value, bool | float):
        raise ValueError("share must be a decimal string")
    try:
        result = Decimal(value.strip()) if isinstance(value, str) else Decimal(value)  # type: ignore[arg-type]
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"not a decimal: {value!r}") from None
    if not result.is_finite():
        raise ValueError("share must be finite")
    return result


_money_serializer = PlainSerializer(format_money, return_type=str, when_used="json")

_RESPONSE_MONEY_JSON = core_schema.chain_schema(
    [
        core_schema.union_schema(
            [core_schema.str_schema(strict=True), core_schema.int_schema(strict=True)],
            mode="left_to_right",
            custom_error_type="money_type",
            custom_error_message='money must be a decimal string like "12.50" (a JSON float is refused)',
        ),
        core_schema.decimal_schema(allow_inf_nan=False),
    ]
)
"""`_parse_response_money`'s rule for JSON, checked inside pydantic-core: a string (or an integer), never a
JSON float, finite. A listed page holds 400 amounts: a Python validator per amount was a third of its
parse."""


def _response_money_schema(_source: Any, _handler: Any) -> core_schema.CoreSchema:
    return core_schema.json_or_python_schema(
        json_schema=_RESPONSE_MONEY_JSON,
        python_schema=core_schema.no_info_plain_validator_function(_parse_response_money),
    )


#: Money in a response: Decimal in Python, ``"12.50"`` on the wire. Floats are refused.
Money = Annotated[
    Decimal,
    GetPydanticSchema(_response_money_schema),
    _money_serializer,
    WithJsonSchema({"type": "string", "pattern": RESPONSE_AMOUNT_PATTERN, "examples": ["12.50"]}),
]
#: Money in a request: positive, at most two decimals, a string on the wire (JSON numbers refused).
RequestMoney = Annotated[
    Decimal,
    PlainValidator(_parse_request_money),
    _money_serializer,
    WithJsonSchema({"type": "string", "pattern": REQUEST_AMOUNT_PATTERN, "examples": ["12.50"]}),
]
#: As ``RequestMoney`` but zero is allowed (e.g. a settlement policy's minimum balance).
RequestMoneyOrZero = Annotated[
    Decimal,
    PlainValidator(_parse_request_money_or_zero),
    _money_serializer,
    WithJsonSchema({"type": "string", "pattern": REQUEST_AMOUNT_PATTERN, "examples": ["0.00"]}),
]
#: A percentage as a decimal string (settlement destination shares, e.g. ``"100"``).
Percent = Annotated[
    Decimal,
    PlainValidator(_parse_percent),
    PlainSerializer(lambda v: format(v, "f"), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": r"^\d+(\.\d+)?$", "examples": ["100"]}),
]


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _check_note(value: str) -> str:
    if _CONTROL_CHARS.search(value):
        raise ValueError("note must not contain control characters")
    return value


@cache
def _optional_keys(model: type[BaseModel], by_alias: bool) -> tuple[str, ...]:
    """Keys of a model's optional fields as serialized (computed once per model: serialization is hot)."""
    return tuple(
        (field.serialization_alias or field.alias or name) if by_alias else name
        for name, field in model.model_fields.items()
        if not field.is_required()
    )


Reference = Annotated[str, StringConstraints(pattern=REFERENCE_PATTERN)]
Currency = Annotated[str, StringConstraints(pattern=CURRENCY_PATTERN)]
Note = Annotated[str, StringConstraints(max_length=MAX_NOTE_LENGTH), AfterValidator(_check_note)]
Msisdn = Annotated[str, StringConstraints(pattern=r"^[0-9]{7,15}$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1, max_length=255)]

# --------------------------------------------------------------------------------------------------
# Bases
# --------------------------------------------------------------------------------------------------


class WireModel(BaseModel):
    """Base of all wire models: camelCase aliases, snake_case attributes, left-out optional fields."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    @model_serializer(mode="wrap")
    def _leave_out_unset_optionals(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ):  # no return annotation on purpose: the JSON schema then stays the model's own schema
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for key in _optional_keys(type(self), bool(info.by_alias)):
            if key in data and data[key] is None:
                del data[key]
        return data

    def to_wire(self) -> dict[str, Any]:
        """The JSON body as sent on the wire (camelCase, decimal strings, left-out fields omitted)."""
        return self.model_dump(by_alias=True, mode="json")


class ResponseModel(WireModel):
    """A resource returned by the service: unknown fields are kept, never refused."""

    model_config = ConfigDict(extra="allow")


class RequestModel(WireModel):
    """A request body: validated per the spec; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------------
# Movement records (collections, payouts) and transactions
# --------------------------------------------------------------------------------------------------


class LineageLink(ResponseModel):
    type: str  # collection, payout, wallet_transfer (open)
    reference: str


class Reconciliation(ResponseModel):
    status: str  # unchecked, matched, mismatched (open)
    checked_at: datetime | None = None


class MovementRecord(ResponseModel):
    """Shared shape of a collection and a payout."""

    reference: str
    status: str
    amount: Money | None = None
    currency: str | None = None
    provider: str | None = None
    fee: Money | None = None
    fee_bearer: str | None = None
    payer_amount: Money | None = None
    recipient_amount: Money | None = None
    note: str | None = None
    failure_reason: str | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    channel: str | None = None
    settlement_status: str | None = None
    reconciliation: Reconciliation | None = None
    parent: LineageLink | None = None
    compensation: LineageLink | None = None


class Collection(MovementRecord):
    """A collection (money in). Statuses: see ``COLLECTION_STATUSES`` (open)."""


class Payout(MovementRecord):
    """A payout (money out). Statuses: see ``PAYOUT_STATUSES`` (open)."""


class Transaction(MovementRecord):
    """An item of ``GET /v1/transactions``."""

    id: str
    kind: str
    direction: str | None = None


# --------------------------------------------------------------------------------------------------
# Hosted checkouts
# --------------------------------------------------------------------------------------------------


class CheckoutAttempt(ResponseModel):
    collection_reference: str
    provider: str
    payer: str
    status: str
    created_at: datetime
    amount: Money
    failure_reason: str | None = None


class HostedCheckout(ResponseModel):
    id: str
    reference: str
    amount: Money | None
    currency: str
    environment: str
    status: str
    url: str
    expires_at: datetime | None
    paid_at: datetime | None
    collection_reference: str | None
    created_at: datetime
    amount_type: str
    min_amount: Money | None
    max_amount: Money | None
    suggested_amounts: list[Money]
    usage: str
    payments_count: int = Field(ge=0)
    total_collected: Money
    description: str | None = None
    success_url: str | None = None
    cancel_url: str | None = None
    attempts: list[CheckoutAttempt] | None = None


# --------------------------------------------------------------------------------------------------
# Utilities
# --------------------------------------------------------------------------------------------------


class UtilityProduct(ResponseModel):
    id: str
    category: str
    network: str
    name: str
    kind: str  # fixed, flexi
    currency: str
    delivery: str  # verified, unverified
    description: str | None = None
    price: Money | None = None
    min: Money | None = None
    max: Money | None = None
    validity: str | None = None


class PurchaseProduct(ResponseModel):
    id: str | None = None
    category: str | None = None
    network: str | None = None
    name: str | None = None


class PurchaseBeneficiary(ResponseModel):
    msisdn: str | None = None


class PurchasePayer(ResponseModel):
    provider: str | None = None
    msisdn: str | None = None


class PurchaseFunding(ResponseModel):
    type: str | None = None
    payer: PurchasePayer | None = None


class UtilityPurchase(ResponseModel):
    reference: str
    status: str
    product: PurchaseProduct | None = None
    beneficiary: PurchaseBeneficiary | None = None
    amount: Money | None = None
    currency: str | None = None
    fee: Money | None = None
    gross: Money | None = None
    funding: PurchaseFunding | None = None
    failure_reason: str | None = None
    created_at: datetime | None = None


class UtilityFeeQuote(ResponseModel):
    product_id: str
    amount: Money
    currency: str
    fee: Money
    gross: Money


# --------------------------------------------------------------------------------------------------
# Transfers, settlements, account
# --------------------------------------------------------------------------------------------------


class Transfer(ResponseModel):
    reference: str
    amount: Money
    currency: str
    status: str
    recipient_handle: str | None = None
    recipient_name: str | None = None
    failure_reason: str | None = None
    created_at: datetime | None = None


class SettlementRun(ResponseModel):
    id: str
    reference: str
    status: str
    item_count: int
    total: Money
    currency: str
    started_at: datetime
    outcome: str | None = None
    completed_at: datetime | None = None


class SettlementRunEventData(SettlementRun):
    """A settlement run as carried in a webhook: it has no ``id`` (match on ``reference``)."""

    id: str | None = None  # type: ignore[assignment]


class LimitUsage(ResponseModel):
    used: Money
    remaining: Money


class LimitPeriod(ResponseModel):
    period: str
    limit: Money
    in_: LimitUsage = Field(alias="in")
    out: LimitUsage


class CurrencyLimits(ResponseModel):
    currency: str
    per_transaction: Money
    daily: LimitPeriod
    monthly: LimitPeriod


class WalletAccount(ResponseModel):
    name: str
    balances: dict[str, Money] = Field(default_factory=dict)
    reserved: dict[str, Money] = Field(default_factory=dict)
    created_at: datetime | None = None


class FeeQuote(ResponseModel):
    """Fee preview of a payout or collection (contract.md)."""

    amount: Money
    currency: str
    fee: Money
    provider: str | None = None
    fee_bearer: str | None = None
    payer_amount: Money | None = None
    recipient_amount: Money | None = None


class PaymentMethod(ResponseModel):
    provider: str
    name: str | None = None
    type: str | None = None  # mobile_money, bank, card (open)
    currencies: list[str] = Field(default_factory=list)
    collections: bool | None = None
    payouts: bool | None = None


class PartyLookup(ResponseModel):
    provider: str | None = None
    msisdn: str
    name: str | None = None


class Recipient(ResponseModel):
    handle: str
    name: str | None = None


class SettlementDestination(ResponseModel):
    type: str
    provider: str | None = None
    account_number: str | None = None
    account_name: str | None = None
    share: Percent | None = None


class SettlementPolicy(ResponseModel):
    schedule: str
    currency: str | None = None
    minimum_balance: Money | None = None
    destinations: list[SettlementDestination] = Field(default_factory=list)
    updated_at: datetime | None = None


class TokenResponse(BaseModel):
    """Token endpoint answer (snake_case on the wire already)."""

    model_config = ConfigDict(extra="allow")

    access_token: str
    token_type: str = "Bearer"
    expires_in: int = 300


# --------------------------------------------------------------------------------------------------
# Errors, batches, webhooks
# --------------------------------------------------------------------------------------------------


class ErrorDetail(ResponseModel):
    code: str
    message: str


class ErrorBody(ResponseModel):
    error: ErrorDetail


class BatchResultItem(ResponseModel):
    reference: str
    status: int
    payout: Payout | None = None
    error: ErrorDetail | None = None

    @property
    def accepted(self) -> bool:
        """True when the item was accepted (202)."""
        return self.status == 202


class PayoutBatchResult(ResponseModel):
    batch_id: str
    reference: str
    items: list[BatchResultItem]


class WebhookEnvelope(ResponseModel):
    """Body of a webhook delivery and an item of ``GET /v1/events``."""

    id: str
    type: str
    created_at: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def record(self) -> ResponseModel | dict[str, Any]:
        """``data`` as a typed record chosen by the event type's prefix; raw dict for unknown types."""
        model = _EVENT_DATA_MODELS.get(self.type.split(".", 1)[0])
        return model.model_validate(self.data) if model else dict(self.data)


_EVENT_DATA_MODELS: dict[str, type[ResponseModel]] = {
    "collection": Collection,
    "payout": Payout,
    "utility_purchase": UtilityPurchase,
    "settlement": SettlementRunEventData,
    "transfer": Transfer,
}

# --------------------------------------------------------------------------------------------------
# Lists and pages
# --------------------------------------------------------------------------------------------------


class CheckoutPage(ResponseModel):
    items: list[HostedCheckout]
    next_cursor: str  # spec: required, empty when there is no next page


class SettlementPage(ResponseModel):
    items: list[SettlementRun]
    next_cursor: str | None = None


class TransactionPage(ResponseModel):
    items: list[Transaction]
    next_cursor: str | None = None


class EventPage(ResponseModel):
    items: list[WebhookEnvelope]
    next_after: str | None = None


class UtilityProductList(ResponseModel):
    items: list[UtilityProduct]


class WalletAccountList(ResponseModel):
    items: list[WalletAccount]


class CurrencyLimitsList(ResponseModel):
    items: list[CurrencyLimits]


class PaymentMethodList(ResponseModel):
    items: list[PaymentMethod]


# --------------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------------


class Destination(RequestModel):
    """Where a payout goes."""

    type: Literal["msisdn", "account", "card"]
    value: NonEmpty


class Payer(RequestModel):
    """Who is asked to approve a collection."""

    type: Literal["msisdn", "account", "card"]
    value: NonEmpty


class PayoutRequest(RequestModel):
    """Body of ``POST /v1/payouts`` and an item of a payout batch."""

    reference: Reference
    amount: RequestMoney
    currency: Currency
    provider: NonEmpty
    destination: Destination
    note: Note | None = None


class PayoutBatchRequest(RequestModel):
    """Body of ``POST /v1/payout-batches``: 1..100 payouts with unique references."""

    reference: Reference
    items: list[PayoutRequest] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)

    @field_validator("items")
    @classmethod
    def _unique_references(cls, items: list[PayoutRequest]) -> list[PayoutRequest]:
        seen: set[str] = set()
        for item in items:
            if item.reference in seen:
                raise ValueError(f"reference {item.reference!r} is repeated in the batch")
            seen.add(item.reference)
        return items


class CollectionRequest(RequestModel):
    """Body of ``POST /v1/collections``."""

    reference: Reference
    amount: RequestMoney
    currency: Currency
    provider: NonEmpty
    payer: Payer
    note: Note | None = None


class CheckoutCreate(RequestModel):
    """Body of ``POST /v1/checkouts`` (contract.md)."""

    reference: Reference
    currency: Currency
    amount_type: Literal["fixed", "open"] = "fixed"
    amount: RequestMoney | None = None
    min_amount: RequestMoney | None = None
    max_amount: RequestMoney | None = None
    suggested_amounts: list[RequestMoney] | None = None
    usage: Literal["single", "reusable"] = "single"
    description: str | None = Field(default=None, max_length=500)
    success_url: str | None = None
    cancel_url: str | None = None
    expires_at: datetime | None = None

    @model_validator(mode="after")
    def _amounts_fit_type(self) -> CheckoutCreate:
        if self.amount_type == "fixed":
            if self.amount is None:
                raise ValueError("amount is required when amountType is fixed")
            if self.min_amount is not None or self.max_amount is not None:
                raise ValueError("minAmount and maxAmount apply only to amountType open")
        else:
            if self.amount is not None:
                raise ValueError("amount applies only to amountType fixed")
            if self.min_amount is not None and self.max_amount is not None:
                if self.min_amount > self.max_amount:
                    raise ValueError("minAmount must not exceed maxAmount")
        return self


class CheckoutCancel(RequestModel):
    """Body of ``POST /v1/checkouts/{id}/cancel``: empty object."""


class Beneficiary(RequestModel):
    msisdn: Msisdn


class FundingPayer(RequestModel):
    provider: NonEmpty
    msisdn: Msisdn


class Funding(RequestModel):
    """How a utility purchase is paid: the wallet, or a collection from ``payer``."""

    type: Literal["wallet", "collection"]
    payer: FundingPayer | None = None

    @model_validator(mode="after")
    def _payer_for_collection(self) -> Funding:
        if self.type == "collection" and self.payer is None:
            raise ValueError("funding type collection needs a payer")
        return self


class UtilityPurchaseRequest(RequestModel):
    """Body of ``POST /v1/utility-purchases``."""

    reference: Reference
    product_id: NonEmpty
    amount: RequestMoney
    currency: Currency
    beneficiary: Beneficiary
    funding: Funding


class TransferRequest(RequestModel):
    """Body of ``POST /v1/transfers``; references starting ``rvr-`` are kept for reversals."""

    reference: Reference
    handle: Annotated[str, StringConstraints(min_length=1, max_length=MAX_HANDLE_LENGTH)]
    amount: RequestMoney
    currency: Currency

    @field_validator("reference")
    @classmethod
    def _not_reversal_prefix(cls, value: str) -> str:
        if value.lower().startswith("rvr-"):
            raise ValueError("references starting with 'rvr-' are kept for reversals")
        return value


class SettlementRequest(RequestModel):
    """Body of ``POST /v1/settlements`` (settle now)."""

    reference: Reference
    currency: Currency | None = None


class ResettlementRequest(RequestModel):
    """Body of ``POST /v1/settlements/{id}/resettlements``."""

    reference: Reference


class SettlementDestinationRequest(RequestModel):
    type: Literal["bank", "mobile_money"]
    provider: NonEmpty
    account_number: NonEmpty
    account_name: str | None = None
    share: Percent = Decimal("100")

    @field_validator("share")
    @classmethod
    def _share_range(cls, value: Decimal) -> Decimal:
        if not Decimal(0) < value <= Decimal(100):
            raise ValueError("share must be a percentage above 0 and at most 100")
        return value


class SettlementPolicyRequest(RequestModel):
    """Body of ``PUT /v1/settlement-policy``: the policy without ``updatedAt``; shares add up to 100."""

    schedule: Literal["daily", "weekly", "manual"]
    currency: Currency = "GHS"
    minimum_balance: RequestMoneyOrZero = Decimal("0.00")
    destinations: list[SettlementDestinationRequest] = Field(min_length=1)

    @field_validator("destinations")
    @classmethod
    def _shares_add_up(cls, value: list[SettlementDestinationRequest]) -> list[SettlementDestinationRequest]:
        total = sum((d.share for d in value), Decimal(0))
        if total != Decimal(100):
            raise ValueError(f"destination shares must add up to 100, got {total}")
        return value
