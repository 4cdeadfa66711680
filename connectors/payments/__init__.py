"""Typed async client of the Payments Service API (httpx + pydantic; never imports prefect).

```python
from payops.connectors.payments import PaymentsClient, PaymentsSettings
async with PaymentsClient(PaymentsSettings()) as client:
    payout = await client.payouts.get("ref-1")
```
"""

from . import models
from ._auth import AccessToken, PaymentsAuth
from ._idempotency import new_idempotency_key
from ._resources import ENDPOINTS
from ._retry import delay, should_retry
from ._settings import PaymentsSettings
from .client import PaymentsClient
from .errors import *  # noqa: F403  (the error module defines its own __all__)
from .errors import __all__ as _errors_all
from .models import (
    BatchResultItem,
    Beneficiary,
    CheckoutAttempt,
    CheckoutCreate,
    CheckoutPage,
    Collection,
    CollectionRequest,
    CurrencyLimits,
    Destination,
    ErrorBody,
    EventPage,
    FeeQuote,
    Funding,
    FundingPayer,
    HostedCheckout,
    PartyLookup,
    Payer,
    PaymentMethod,
    Payout,
    PayoutBatchRequest,
    PayoutBatchResult,
    PayoutRequest,
    Recipient,
    ResettlementRequest,
    SettlementPage,
    SettlementPolicy,
    SettlementPolicyRequest,
    SettlementRequest,
    SettlementRun,
    Transaction,
    TransactionPage,
    Transfer,
    TransferRequest,
    UtilityFeeQuote,
    UtilityProduct,
    UtilityPurchase,
    UtilityPurchaseRequest,
    WalletAccount,
    WebhookEnvelope,
)
from .webhooks import (
    EventDeduplicator,
    WebhookVerificationError,
    WebhookVerifier,
    sign_webhook,
    verify_webhook,
)

__all__ = [
    # client
    "PaymentsClient",
    "PaymentsSettings",
    "PaymentsAuth",
    "AccessToken",
    "ENDPOINTS",
    "new_idempotency_key",
    "should_retry",
    "delay",
    # webhooks
    "WebhookVerifier",
    "WebhookVerificationError",
    "verify_webhook",
    "sign_webhook",
    "EventDeduplicator",
    # models
    "models",
    "BatchResultItem",
    "Beneficiary",
    "CheckoutAttempt",
    "CheckoutCreate",
    "CheckoutPage",
    "Collection",
    "CollectionRequest",
    "CurrencyLimits",
    "Destination",
    "ErrorBody",
    "EventPage",
    "FeeQuote",
    "Funding",
    "FundingPayer",
    "HostedCheckout",
    "PartyLookup",
    "Payer",
    "PaymentMethod",
    "Payout",
    "PayoutBatchRequest",
    "PayoutBatchResult",
    "PayoutRequest",
    "Recipient",
    "ResettlementRequest",
    "SettlementPage",
    "SettlementPolicy",
    "SettlementPolicyRequest",
    "SettlementRequest",
    "SettlementRun",
    "Transaction",
    "TransactionPage",
    "Transfer",
    "TransferRequest",
    "UtilityFeeQuote",
    "UtilityProduct",
    "UtilityPurchase",
    "UtilityPurchaseRequest",
    "WalletAccount",
    "WebhookEnvelope",
    # errors
    *_errors_all,
]
