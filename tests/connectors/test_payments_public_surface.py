"""Pins the public surface of ``connectors.payments``."""

from __future__ import annotations

import inspect

import payops.connectors.payments as payments
from payops.connectors.payments import PaymentsClient

EXPECTED_CORE = {
    "PaymentsClient",
    "PaymentsSettings",
    "PaymentsAuth",
    "AccessToken",
    "ENDPOINTS",
    "new_idempotency_key",
    "should_retry",
    "delay",
    "WebhookVerifier",
    "WebhookVerificationError",
    "verify_webhook",
    "sign_webhook",
    "EventDeduplicator",
    "models",
    "PaymentsError",
    "APIStatusError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "error_from_response",
    "ERROR_CLASSES_BY_CODE",
    "parse_retry_after",
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
    "Payout",
    "PayoutRequest",
    "PayoutBatchRequest",
    "PayoutBatchResult",
    "BatchResultItem",
    "Collection",
    "CollectionRequest",
    "Transaction",
    "TransactionPage",
    "WalletAccount",
    "CurrencyLimits",
    "FeeQuote",
    "SettlementRun",
    "SettlementPolicy",
    "Transfer",
    "UtilityProduct",
    "UtilityPurchase",
    "WebhookEnvelope",
}

GROUPS = {
    "collections": {"create", "get", "create_or_get"},
    "checkouts": {"list", "iterate", "get", "create", "cancel"},
    "payouts": {"create", "get", "create_or_get"},
    "payout_batches": {"create"},
    "utilities": {"products", "fee_quote", "purchase", "get_purchase", "purchase_or_get"},
    "fee_quotes": {"payout", "collection"},
    "settlements": {"list", "iterate", "latest", "get", "settle_now", "resettle"},
    "settlement_policy": {"get", "put", "delete"},
    "transfers": {"create", "get", "create_or_get"},
    "recipients": {"get"},
    "payment_methods": {"list"},
    "party_lookups": {"lookup"},
    "limits": {"get"},
    "wallet": {"get"},
    "transactions": {"list", "iterate", "pages", "read_window"},
    "events": {"list", "iterate"},
}


def test_all_names_exist_and_core_names_are_exported() -> None:
    assert len(payments.__all__) == len(set(payments.__all__))
    for name in payments.__all__:
        assert hasattr(payments, name), name
    assert EXPECTED_CORE <= set(payments.__all__)


def test_client_resource_groups(make_client) -> None:
    client = make_client(lambda r: None).client
    for group, methods in GROUPS.items():
        obj = getattr(client, group)
        public = {n for n, _ in inspect.getmembers(obj, callable) if not n.startswith("_")}
        assert public == methods, group
    assert set(PaymentsClient.__init__.__code__.co_varnames) >= {"settings", "transport", "sleep", "rng"}


def test_errors_share_one_base() -> None:
    for name in payments.__all__:
        obj = getattr(payments, name)
        if inspect.isclass(obj) and name.endswith("Error") and name != "WebhookVerificationError":
            assert issubclass(obj, payments.PaymentsError), name
    assert issubclass(payments.WebhookVerificationError, payments.PaymentsError)


def test_connector_never_imports_prefect() -> None:
    import pathlib
    import re

    pattern = re.compile(r"^\s*(import|from)\s+prefect\b", re.M)
    for path in pathlib.Path(payments.__file__).parent.glob("*.py"):
        assert not pattern.search(path.read_text(encoding="utf-8")), path.name
