"""Resource groups of ``PaymentsClient``: one method per endpoint of the spec.

Create methods take either a request model or its fields as keyword arguments, plus an optional
``idempotency_key`` (flows pass deterministic keys; otherwise one is generated once per call and reused on
every retry).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar

from ._idempotency import new_idempotency_key
from ._slices import SlicedRead, read_sliced
from .errors import (
    APIConnectionError,
    CheckoutUnavailableError,
    DuplicateReferenceError,
    InternalServerError,
    NotFoundError,
    PaymentsError,
)
from .ledger_page import LedgerTransaction, LedgerTransactionPage
from .models import (
    CheckoutCancel,
    CheckoutCreate,
    CheckoutPage,
    Collection,
    CollectionRequest,
    CurrencyLimits,
    CurrencyLimitsList,
    EventPage,
    FeeQuote,
    HostedCheckout,
    PartyLookup,
    PaymentMethod,
    PaymentMethodList,
    Payout,
    PayoutBatchRequest,
    PayoutBatchResult,
    PayoutRequest,
    Recipient,
    RequestModel,
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
    UtilityProductList,
    UtilityPurchase,
    UtilityPurchaseRequest,
    WalletAccount,
    WalletAccountList,
    WebhookEnvelope,
)

__all__ = ["ENDPOINTS"]

Req = TypeVar("Req", bound=RequestModel)
T = TypeVar("T")
ReqT = TypeVar("ReqT", bound=RequestModel)
RecT = TypeVar("RecT")
M = TypeVar("M")
P = TypeVar("P", TransactionPage, LedgerTransactionPage)

#: "METHOD /v1/path/{template}" of the spec → client method (``group.method``).
ENDPOINTS: dict[str, str] = {
    "POST /v1/collections": "collections.create",
    "GET /v1/collections/{reference}": "collections.get",
    "GET /v1/fee-quotes/collections": "fee_quotes.collection",
    "GET /v1/checkouts": "checkouts.list",
    "POST /v1/checkouts": "checkouts.create",
    "GET /v1/checkouts/{checkoutId}": "checkouts.get",
    "POST /v1/checkouts/{checkoutId}/cancel": "checkouts.cancel",
    "POST /v1/payouts": "payouts.create",
    "GET /v1/payouts/{reference}": "payouts.get",
    "GET /v1/fee-quotes/payouts": "fee_quotes.payout",
    "POST /v1/payout-batches": "payout_batches.create",
    "GET /v1/utility-products": "utilities.products",
    "GET /v1/fee-quotes/utilities": "utilities.fee_quote",
    "POST /v1/utility-purchases": "utilities.purchase",
    "GET /v1/utility-purchases/{reference}": "utilities.get_purchase",
    "GET /v1/limits": "limits.get",
    "GET /v1/wallet": "wallet.get",
    "GET /v1/transactions": "transactions.list",
    "GET /v1/settlements": "settlements.list",
    "POST /v1/settlements": "settlements.settle_now",
    "GET /v1/settlements/latest": "settlements.latest",
    "GET /v1/settlements/{id}": "settlements.get",
    "POST /v1/settlements/{id}/resettlements": "settlements.resettle",
    "GET /v1/settlement-policy": "settlement_policy.get",
    "PUT /v1/settlement-policy": "settlement_policy.put",
    "DELETE /v1/settlement-policy": "settlement_policy.delete",
    "POST /v1/transfers": "transfers.create",
    "GET /v1/transfers/{reference}": "transfers.get",
    "GET /v1/recipients/{handle}": "recipients.get",
    "GET /v1/payment-methods": "payment_methods.list",
    "GET /v1/party-lookups": "party_lookups.lookup",
    "GET /v1/events": "events.list",
}


def _body(model: type[Req], request: Req | None, fields: dict[str, Any]) -> Req:
    """The request model from either a ready instance or keyword fields (validated here, not remotely)."""
    if request is not None:
        if fields:
            raise TypeError(f"pass either a {model.__name__} or its fields, not both")
        if not isinstance(request, model):
            raise TypeError(f"expected {model.__name__}, got {type(request).__name__}")
        return request
    return model(**fields)


def _money_param(value: Decimal | str) -> str:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


async def _create_or_read(create: Callable[[], Awaitable[T]], read: Callable[[], Awaitable[T]]) -> T:
    """Create; if the outcome is unknown (timeout, 5xx after retries) or the reference was already used
    (``duplicate_reference``), read the record back by reference. A 404 on read-back re-raises the
    create's error: nothing ran, and the caller can repeat with the same key."""
    try:
        return await create()
    except DuplicateReferenceError:
        return await read()
    except CheckoutUnavailableError:
        raise
    except (InternalServerError, APIConnectionError) as exc:
        try:
            return await read()
        except NotFoundError:
            raise exc from None


async def _paginate(
    fetch: Callable[[str | None], Awaitable[tuple[list[T], str | None]]],
) -> AsyncIterator[T]:
    cursor: str | None = None
    while True:
        items, next_cursor = await fetch(cursor)
        for item in items:
            yield item
        if not next_cursor:
            return
        _check_advanced(cursor, next_cursor)
        cursor = next_cursor


def _check_advanced(cursor: str | None, next_cursor: str) -> None:
    if next_cursor == cursor:
        raise PaymentsError("pagination did not advance (same cursor returned twice)")


WINDOW_WIDTH = 16
"""Slices of a transaction window read at once when the caller does not size it (`read_window`)."""

_SEND_TURNS = 6
"""Turns of the event loop given to a request just started, so its bytes are written before the caller gets
back to work: httpx's own pool writes within 4, aiohttp's pool under httpx within 1. Not enough turns (a
slower transport, a rate limiter's wait) only costs the overlap, never a page."""


async def _prefetching_pages(
    fetch: Callable[[str | None], Awaitable[tuple[list[T], str | None]]],
) -> AsyncIterator[list[T]]:
    """Each page's items, the next page requested before this one is handed over: while the caller works on a
    page (even without awaiting), the service builds the next one."""
    pending = asyncio.ensure_future(fetch(None))
    cursor: str | None = None
    try:
        while True:
            items, next_cursor = await pending
            if next_cursor:
                _check_advanced(cursor, next_cursor)
                cursor = next_cursor
                pending = asyncio.ensure_future(fetch(next_cursor))
                for _ in range(_SEND_TURNS):
                    await asyncio.sleep(0)
            yield items
            if not next_cursor:
                return
    finally:
        if not pending.done():  # the consumer stopped early, or failed: the request in flight is dropped
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending


class _Caller(Protocol):
    """What a resource group needs of `PaymentsClient` (which builds the groups): its two ways to call."""

    async def call(self, model: type[M], method: str, template: str, **kwargs: Any) -> M: ...

    async def request(self, method: str, template: str, **kwargs: Any) -> Any: ...


class _Group:
    def __init__(self, client: _Caller) -> None:
        self._client = client


class _CreatedByReference(_Group, Generic[ReqT, RecT]):
    """A resource created by ``POST {path}`` and read back by reference at ``GET {path}/{reference}``."""

    _request: type[ReqT]
    _record: type[RecT]
    _path: str

    async def create(
        self, request: ReqT | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> RecT:
        """POST the request; the Idempotency-Key is the caller's or one fixed before any retry."""
        body = _body(self._request, request, fields)
        return await self._client.call(
            self._record, "POST", self._path, body=body, idempotency_key=idempotency_key
        )

    async def get(self, reference: str) -> RecT:
        """GET the record by its reference."""
        return await self._client.call(
            self._record, "GET", self._path + "/{reference}", path_params={"reference": reference}
        )

    async def create_or_get(
        self, request: ReqT | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> RecT:
        """``create``; after an unknown outcome (504, timeout, 5xx) or ``duplicate_reference``, read back."""
        body = _body(self._request, request, fields)
        key = idempotency_key or new_idempotency_key()
        return await _create_or_read(
            lambda: self.create(body, idempotency_key=key), lambda: self.get(body.reference)
        )


class Collections(_CreatedByReference[CollectionRequest, Collection]):
    """``/v1/collections``: ask a payer to approve a payment (202: accepted, not settled)."""

    _request, _record, _path = CollectionRequest, Collection, "/v1/collections"


class Checkouts(_Group):
    """``/v1/checkouts``."""

    async def list(
        self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> CheckoutPage:
        """GET /v1/checkouts: one page, newest first (``next_cursor`` empty on the last page)."""
        return await self._client.call(
            CheckoutPage, "GET", "/v1/checkouts", params={"status": status, "limit": limit, "cursor": cursor}
        )

    def iterate(
        self, *, status: str | None = None, limit: int | None = None
    ) -> AsyncIterator[HostedCheckout]:
        """All checkouts, following ``nextCursor``."""

        async def fetch(cursor: str | None) -> tuple[list[HostedCheckout], str | None]:
            page = await self.list(status=status, limit=limit, cursor=cursor)
            return page.items, page.next_cursor

        return _paginate(fetch)

    async def get(self, checkout_id: str) -> HostedCheckout:
        """GET /v1/checkouts/{checkoutId}: includes ``attempts``."""
        return await self._client.call(
            HostedCheckout, "GET", "/v1/checkouts/{checkoutId}", path_params={"checkoutId": checkout_id}
        )

    async def create(
        self, request: CheckoutCreate | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> HostedCheckout:
        """POST /v1/checkouts: create a hosted checkout (payment link)."""
        body = _body(CheckoutCreate, request, fields)
        return await self._client.call(
            HostedCheckout, "POST", "/v1/checkouts", body=body, idempotency_key=idempotency_key
        )

    async def cancel(self, checkout_id: str, *, idempotency_key: str | None = None) -> HostedCheckout:
        """POST /v1/checkouts/{checkoutId}/cancel."""
        return await self._client.call(
            HostedCheckout,
            "POST",
            "/v1/checkouts/{checkoutId}/cancel",
            path_params={"checkoutId": checkout_id},
            body=CheckoutCancel(),
            idempotency_key=idempotency_key,
        )


class Payouts(_CreatedByReference[PayoutRequest, Payout]):
    """``/v1/payouts``: send money from the wallet (202: accepted, not yet delivered)."""

    _request, _record, _path = PayoutRequest, Payout, "/v1/payouts"


class PayoutBatches(_Group):
    """``/v1/payout-batches``."""

    async def create(
        self,
        request: PayoutBatchRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> PayoutBatchResult:
        """POST /v1/payout-batches: up to 100 payouts; each item accepted or refused on its own."""
        body = _body(PayoutBatchRequest, request, fields)
        return await self._client.call(
            PayoutBatchResult, "POST", "/v1/payout-batches", body=body, idempotency_key=idempotency_key
        )


class Utilities(_Group):
    """Airtime and data: products, fee quotes, purchases."""

    async def products(self) -> list[UtilityProduct]:
        """GET /v1/utility-products."""
        return (await self._client.call(UtilityProductList, "GET", "/v1/utility-products")).items

    async def fee_quote(
        self, *, product_id: str, amount: Decimal | str, currency: str = "GHS"
    ) -> UtilityFeeQuote:
        """GET /v1/fee-quotes/utilities (nothing is reserved)."""
        params = {"productId": product_id, "amount": _money_param(amount), "currency": currency}
        return await self._client.call(UtilityFeeQuote, "GET", "/v1/fee-quotes/utilities", params=params)

    async def purchase(
        self,
        request: UtilityPurchaseRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> UtilityPurchase:
        """POST /v1/utility-purchases (202: accepted, not delivered)."""
        body = _body(UtilityPurchaseRequest, request, fields)
        return await self._client.call(
            UtilityPurchase, "POST", "/v1/utility-purchases", body=body, idempotency_key=idempotency_key
        )

    async def get_purchase(self, reference: str) -> UtilityPurchase:
        """GET /v1/utility-purchases/{reference}."""
        return await self._client.call(
            UtilityPurchase, "GET", "/v1/utility-purchases/{reference}", path_params={"reference": reference}
        )

    async def purchase_or_get(
        self,
        request: UtilityPurchaseRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> UtilityPurchase:
        """``purchase``; after an unknown outcome or ``duplicate_reference``, read back by reference."""
        body = _body(UtilityPurchaseRequest, request, fields)
        key = idempotency_key or new_idempotency_key()
        return await _create_or_read(
            lambda: self.purchase(body, idempotency_key=key), lambda: self.get_purchase(body.reference)
        )


class FeeQuotes(_Group):
    """Fee previews of payouts and collections."""

    async def payout(
        self,
        *,
        amount: Decimal | str,
        currency: str,
        provider: str,
        destination_type: str | None = None,
        fee_bearer: str | None = None,
    ) -> FeeQuote:
        """GET /v1/fee-quotes/payouts."""
        params = {
            "amount": _money_param(amount),
            "currency": currency,
            "provider": provider,
            "destinationType": destination_type,
            "feeBearer": fee_bearer,
        }
        return await self._client.call(FeeQuote, "GET", "/v1/fee-quotes/payouts", params=params)

    async def collection(
        self, *, amount: Decimal | str, currency: str, provider: str, fee_bearer: str | None = None
    ) -> FeeQuote:
        """GET /v1/fee-quotes/collections."""
        params = {
            "amount": _money_param(amount),
            "currency": currency,
            "provider": provider,
            "feeBearer": fee_bearer,
        }
        return await self._client.call(FeeQuote, "GET", "/v1/fee-quotes/collections", params=params)


class Settlements(_Group):
    """``/v1/settlements``: runs, settle now, retry of a failed run."""

    async def list(self, *, limit: int | None = None, cursor: str | None = None) -> SettlementPage:
        """GET /v1/settlements: one page, newest first."""
        return await self._client.call(
            SettlementPage, "GET", "/v1/settlements", params={"limit": limit, "cursor": cursor}
        )

    def iterate(self, *, limit: int | None = None) -> AsyncIterator[SettlementRun]:
        """All settlement runs, following ``nextCursor``."""

        async def fetch(cursor: str | None) -> tuple[list[SettlementRun], str | None]:
            page = await self.list(limit=limit, cursor=cursor)
            return page.items, page.next_cursor

        return _paginate(fetch)

    async def latest(self) -> SettlementRun:
        """GET /v1/settlements/latest (404 when there is none)."""
        return await self._client.call(SettlementRun, "GET", "/v1/settlements/latest")

    async def get(self, run_id: str) -> SettlementRun:
        """GET /v1/settlements/{id}."""
        return await self._client.call(
            SettlementRun, "GET", "/v1/settlements/{id}", path_params={"id": run_id}
        )

    async def settle_now(
        self,
        request: SettlementRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> SettlementRun:
        """POST /v1/settlements: start a run now (202)."""
        body = _body(SettlementRequest, request, fields)
        return await self._client.call(
            SettlementRun, "POST", "/v1/settlements", body=body, idempotency_key=idempotency_key
        )

    async def resettle(
        self,
        run_id: str,
        request: ResettlementRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> SettlementRun:
        """POST /v1/settlements/{id}/resettlements: pay the failed part of a run again (202)."""
        body = _body(ResettlementRequest, request, fields)
        return await self._client.call(
            SettlementRun,
            "POST",
            "/v1/settlements/{id}/resettlements",
            path_params={"id": run_id},
            body=body,
            idempotency_key=idempotency_key,
        )


class SettlementPolicies(_Group):
    """``/v1/settlement-policy``."""

    async def get(self) -> SettlementPolicy:
        """GET /v1/settlement-policy."""
        return await self._client.call(SettlementPolicy, "GET", "/v1/settlement-policy")

    async def put(self, policy: SettlementPolicyRequest | None = None, /, **fields: Any) -> SettlementPolicy:
        """PUT /v1/settlement-policy: replace where and when settlements are paid."""
        body = _body(SettlementPolicyRequest, policy, fields)
        return await self._client.call(SettlementPolicy, "PUT", "/v1/settlement-policy", body=body)

    async def delete(self) -> None:
        """DELETE /v1/settlement-policy: turn settlement off (204)."""
        await self._client.request("DELETE", "/v1/settlement-policy")


class Transfers(_CreatedByReference[TransferRequest, Transfer]):
    """``/v1/transfers``: wallet to wallet by handle; hold and confirm in one request (200 ``completed``)."""

    _request, _record, _path = TransferRequest, Transfer, "/v1/transfers"


class Recipients(_Group):
    async def get(self, handle: str) -> Recipient:
        """GET /v1/recipients/{handle}: who a handle belongs to."""
        return await self._client.call(
            Recipient, "GET", "/v1/recipients/{handle}", path_params={"handle": handle}
        )


class PaymentMethods(_Group):
    async def list(self) -> list[PaymentMethod]:
        """GET /v1/payment-methods: the providers usable by the account."""
        return (await self._client.call(PaymentMethodList, "GET", "/v1/payment-methods")).items


class PartyLookups(_Group):
    async def lookup(self, *, provider: str, msisdn: str) -> PartyLookup:
        """GET /v1/party-lookups: the holder name behind a mobile money number."""
        return await self._client.call(
            PartyLookup, "GET", "/v1/party-lookups", params={"provider": provider, "msisdn": msisdn}
        )


class Limits(_Group):
    async def get(self) -> list[CurrencyLimits]:
        """GET /v1/limits: one entry per currency (empty: no payment can be made)."""
        return (await self._client.call(CurrencyLimitsList, "GET", "/v1/limits")).items


class Wallet(_Group):
    async def get(self) -> list[WalletAccount]:
        """GET /v1/wallet: balances and reserved amounts."""
        return (await self._client.call(WalletAccountList, "GET", "/v1/wallet")).items


class Transactions(_Group):
    """``/v1/transactions``: the unified list, newest first."""

    async def list(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        channel: str | None = None,
        settlement_status: str | None = None,
        reconciliation_status: str | None = None,
        from_: datetime | None = None,
        to: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        page: type[P] = TransactionPage,  # type: ignore[assignment]
    ) -> P:
        """GET /v1/transactions: one page (``next_cursor`` None on the last page), parsed as ``page``
        (`TransactionPage`, or the ledger's lighter `LedgerTransactionPage`)."""
        params = {
            "kind": kind,
            "status": status,
            "channel": channel,
            "settlementStatus": settlement_status,
            "reconciliationStatus": reconciliation_status,
            "from": from_,
            "to": to,
            "limit": limit,
            "cursor": cursor,
        }
        return await self._client.call(page, "GET", "/v1/transactions", params=params)

    def iterate(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        channel: str | None = None,
        settlement_status: str | None = None,
        reconciliation_status: str | None = None,
        from_: datetime | None = None,
        to: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Transaction]:
        """All matching transactions, following ``nextCursor``."""
        filters = {k: v for k, v in locals().items() if k != "self"}
        return _paginate(self._fetch_pages(filters))

    def pages(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        channel: str | None = None,
        settlement_status: str | None = None,
        reconciliation_status: str | None = None,
        from_: datetime | None = None,
        to: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[list[Transaction]]:
        """As `iterate`, a page at a time, the next page already requested while the caller holds one."""
        filters = {k: v for k, v in locals().items() if k != "self"}
        return _prefetching_pages(self._fetch_pages(filters))

    async def read_window(
        self,
        on_page: Callable[[list[Transaction]], None] | Callable[[list[LedgerTransaction]], None],
        *,
        from_: datetime,
        to: datetime,
        slices: Sequence[tuple[datetime, datetime]] | None = None,
        width: Callable[[], int] = lambda: WINDOW_WIDTH,
        gate: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        kind: str | None = None,
        status: str | None = None,
        channel: str | None = None,
        settlement_status: str | None = None,
        reconciliation_status: str | None = None,
        limit: int = 100,
        page: type[TransactionPage] | type[LedgerTransactionPage] = TransactionPage,
    ) -> SlicedRead:
        """Every matching transaction created in ``[from_, to)``, in slices read at once and cut where the
        list is dense (`_slices`); ``on_page`` gets each page as it arrives (not in the list's order).
        ``slices``: a first cut of the window (they must partition it); ``width``: how many slices may read
        at once; ``gate``: held around each request (the caller's in-flight sizing); ``page``: the model a
        page is parsed as (`LedgerTransactionPage` for the ledger's reads)."""
        filters = {
            "kind": kind,
            "status": status,
            "channel": channel,
            "settlement_status": settlement_status,
            "reconciliation_status": reconciliation_status,
            "limit": limit,
        }

        async def fetch(
            low: datetime, high: datetime, cursor: str | None
        ) -> tuple[list[Transaction] | list[LedgerTransaction], str | None]:
            async with gate() if gate is not None else contextlib.nullcontext():
                found = await self.list(**filters, from_=low, to=high, cursor=cursor, page=page)
            return found.items, found.next_cursor

        return await read_sliced(
            fetch,
            slices or [(from_, to)],
            on_page,
            width=width,
            page_size=limit,
            created_at=lambda tx: tx.created_at,
        )

    def _fetch_pages(
        self, filters: dict[str, Any]
    ) -> Callable[[str | None], Awaitable[tuple[list[Transaction], str | None]]]:
        async def fetch(cursor: str | None) -> tuple[list[Transaction], str | None]:
            page = await self.list(**filters, cursor=cursor)
            return page.items, page.next_cursor

        return fetch


class Events(_Group):
    """``/v1/events``: catch-up feed of webhook events."""

    async def list(self, *, after: str | None = None, limit: int | None = None) -> EventPage:
        """GET /v1/events: events after id ``after`` (``next_after`` None at the end)."""
        return await self._client.call(
            EventPage, "GET", "/v1/events", params={"after": after, "limit": limit}
        )

    def iterate(
        self, *, after: str | None = None, limit: int | None = None
    ) -> AsyncIterator[WebhookEnvelope]:
        """All events after ``after``, following ``nextAfter``; resume later from the last item's ``id``."""

        async def fetch(cursor: str | None) -> tuple[list[WebhookEnvelope], str | None]:
            page = await self.list(after=cursor if cursor is not None else after, limit=limit)
            return page.items, page.next_after

        return _paginate(fetch)
