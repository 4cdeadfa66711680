"""Failure codes in words: what happened, in plain language, and the next step an operator takes.

The one table from a machine code to the sentence a person reads (the console's run page and retry list,
the reports, the Prefect artifacts, the CLI's human output). Machines keep the code: every surface that
shows the words keeps the code in its own field or column. The table holds:

- every code of the spec's Errors table (`errors.ERROR_CLASSES_BY_CODE`; ``internal`` once for 500 and 502);
- what a payout row can get beyond it: the emulator's refusal ``insufficient_balance`` and the payouts'
  ``failureReason`` values (docs/contract.md, *Deterministic test values*);
- the payout statuses a row ends in when the service gives no reason (``failed``, ``refunded``, ``in_review``,
  ``held``), and payops' own reasons for a row (``invalid_row``, the payee name checks).

The spec's enums are open: a code not in the table gets :func:`failure_words`' fallback, which names the code
and sends the operator to support. Lives beside the error map, below every room that shows failures (the
client never imports Prefect; tasks, flows and deployments all may import this).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "FAILS_AGAIN",
    "FAILURE_WORDS",
    "FailureWords",
    "fails_again",
    "failure_words",
    "retried_next_step",
]


class FailureWords(NamedTuple):
    """What happened (``words``) and what the operator should do about it (``next_step``)."""

    words: str
    next_step: str


_SUPPORT = "Contact support with the run's label."
_RETRY_LATER = "Retry the row later; if it happens again, contact support with the run's label."
_ADMIN = "Ask a payops administrator to check the service credential, then retry the row."
_SETTLEMENT_POLICY = "Correct the settlement policy, then settle again."

FAILURE_WORDS: dict[str, FailureWords] = {
    # The spec's Errors table (status, code), in its order.
    "invalid_input": FailureWords(
        "The service found a field missing or malformed.",
        "Correct the field it names in the sheet, then retry the row.",
    ),
    "transfer_refused": FailureWords(
        "The service refused to hold the money for the transfer; nothing left the wallet.",
        "Check the wallet balance and the transfer details, then start the transfer again.",
    ),
    "unauthenticated": FailureWords("The service did not accept payops' sign-in.", _ADMIN),
    "forbidden": FailureWords("The service credential is not allowed to make this payment.", _ADMIN),
    "environment_mismatch": FailureWords(
        "The service credential belongs to the other environment (sandbox or live).", _ADMIN
    ),
    "tier_ineligible": FailureWords(
        "The account's verification level does not allow this payment.",
        "Ask the provider to raise the account's verification level, then retry the row.",
    ),
    "transaction_limit_exceeded": FailureWords(
        "The amount is over the limit for a single payment.",
        "Lower the amount or split it over several rows, then retry.",
    ),
    "daily_limit_exceeded": FailureWords(
        "Today's payout limit is reached.",
        "Retry the row tomorrow, or ask the provider to raise the daily limit.",
    ),
    "monthly_limit_exceeded": FailureWords(
        "This month's payout limit is reached.",
        "Retry the row next month, or ask the provider to raise the monthly limit.",
    ),
    "limits_missing": FailureWords("The service could not read the account's payment limits.", _RETRY_LATER),
    "limits_unusable": FailureWords("The service could not use the account's payment limits.", _RETRY_LATER),
    "business_suspended": FailureWords(
        "The business account is suspended at the service.",
        "Ask the provider why the account is suspended; retry the row once it is lifted.",
    ),
    "business_deactivated": FailureWords(
        "The business account is closed at the service: no payment can be made.",
        "Ask the provider to reopen the account; nothing can be paid until then.",
    ),
    "not_found": FailureWords(
        "The service has nothing with that reference or number.",
        "Check the reference or number, then retry the row.",
    ),
    "product_not_found": FailureWords(
        "No utility product has that product id.", "Correct the product id in the sheet, then retry the row."
    ),
    "idempotency_key_reused": FailureWords(
        "The service saw this request before with different content.",
        "Pay the sheet under a new label; if it happens again, contact support with the run's label.",
    ),
    "request_in_flight": FailureWords(
        "The same request is still being processed by the service.",
        "Wait a minute, then look at the run again before paying anything twice.",
    ),
    "duplicate_reference": FailureWords(
        "The reference was already used for a different payment.",
        "Check whether the payee was paid already; if not, give the row a new reference and retry it.",
    ),
    "reference_reused": FailureWords(
        "The transfer reference was already used for another transfer.",
        "Start the transfer again with a new reference.",
    ),
    "transfer_not_held": FailureWords(
        "The money held for the transfer can no longer be confirmed.", "Start the transfer again."
    ),
    "resettlement_not_allowed": FailureWords(
        "The settlement run cannot be paid again: it did not fail.",
        "Check the settlement run's outcome; only a failed run can be settled again.",
    ),
    "settlement_already_retried": FailureWords(
        "The settlement run was already settled again once.", "Follow the earlier retry of that run instead."
    ),
    "product_not_sellable": FailureWords(
        "The utility product is not on sale now.", "Retry the row later or choose another product."
    ),
    "amount_out_of_range": FailureWords(
        "The amount is outside what the product allows.",
        "Correct the amount to the product's price or range, then retry the row.",
    ),
    "currency_not_supported": FailureWords(
        "The service does not sell in that currency.", "Use a currency the service supports, then retry."
    ),
    "beneficiary_invalid": FailureWords(
        "The product cannot be sold to this number.",
        "Check the number with the customer, then retry the row.",
    ),
    "fee_unpriceable": FailureWords("The service could not work out the fee just now.", _RETRY_LATER),
    "policy_missing_provider": FailureWords(
        "The settlement policy names no provider for a destination.", _SETTLEMENT_POLICY
    ),
    "policy_not_nettable": FailureWords(
        "The settlement policy cannot be paid out as it stands.", _SETTLEMENT_POLICY
    ),
    "destination_not_verified": FailureWords(
        "The provider could not confirm a settlement destination; nothing changed.",
        "Check the destination's account details, then settle again.",
    ),
    "rate_limited": FailureWords(
        "Too many requests reached the service at once.",
        "Wait a minute, then retry; lower the run's request rate if it keeps happening.",
    ),
    "internal": FailureWords("The service failed on its side.", _RETRY_LATER),
    "provider_error": FailureWords(
        "The provider refused to look the number up.", "Check the number with the payee, then retry later."
    ),
    "environment_unknown": FailureWords(
        "The service could not tell which environment it serves.", "Retry in a few minutes."
    ),
    "utilities_unavailable": FailureWords(
        "Utility purchases are unavailable right now.", "Retry in a few minutes."
    ),
    "destination_verification_unavailable": FailureWords(
        "The provider could not be reached to confirm a settlement destination.",
        "Retry the same settlement in a few minutes.",
    ),
    "checkout_unavailable": FailureWords(
        "Hosted checkout is not set up for this account.",
        "Ask a payops administrator to have hosted checkout configured.",
    ),
    "upstream_timeout": FailureWords(
        "The service took too long to answer: the payment may or may not have gone through.",
        "Look the payment up before paying it again (payops payouts followup), then retry only if it did "
        "not go.",
    ),
    "provider_timeout": FailureWords(
        "The provider did not answer the number lookup in time.", "Retry the row later."
    ),
    # What a payout row gets beyond the spec's table: the emulator's refusal and the payouts' failureReason.
    "insufficient_balance": FailureWords(
        "The wallet did not hold enough for the amount plus the fee.",
        "Top up the wallet, then retry the row.",
    ),
    "insufficient_funds_at_provider": FailureWords(
        "The provider could not fund the payout on its side.",
        "Retry the row later; if it fails again, contact the provider.",
    ),
    "account_not_found": FailureWords(
        "The number is not registered with the provider.",
        "Check the number with the payee, then retry the row.",
    ),
    # The payout statuses a row ends in without a reason from the service.
    "failed": FailureWords(
        "The provider did not deliver the payout and gave no reason.",
        "Check the payee's details, then retry the row; if it fails again, contact support with the run's "
        "label.",
    ),
    "refunded": FailureWords(
        "The payout was delivered, then came back to the wallet.",
        "Ask the payee whether the account can receive money, then retry the row.",
    ),
    "in_review": FailureWords(
        "The service is reviewing the payout before sending it.",
        "Wait for the review; follow it with payops payouts followup.",
    ),
    "held": FailureWords(
        "The service holds the payout for a check.",
        "Ask the provider what the check needs; follow it with payops payouts followup.",
    ),
    # payops' own reasons for a row.
    "invalid_row": FailureWords(
        "The row has a problem in the sheet, so payops did not send it.",
        "Correct the row in the sheet, then upload it again.",
    ),
    "name_mismatch": FailureWords(
        "The sheet's payee name does not match the account holder.",
        "Confirm the number with the payee before paying it again.",
    ),
    "name_partial": FailureWords(
        "The sheet's payee name only partly matches the account holder.",
        "Check the name with the payee; if it is someone else, stop the payment.",
    ),
    "name_unverified": FailureWords(
        "The account holder's name could not be looked up.", "Confirm the number with the payee."
    ),
    "no_name_column": FailureWords(
        "The sheet has no payee name column, so no name was checked.",
        "Add a payee name column to the sheet so names are checked next time.",
    ),
}
"""Code → words and next step (module docstring)."""


FAILS_AGAIN = frozenset(
    {
        "account_not_found",
        "beneficiary_invalid",
        "invalid_input",
        "not_found",
        "transaction_limit_exceeded",
        "amount_out_of_range",
        "currency_not_supported",
        "tier_ineligible",
        "business_deactivated",
    }
)
"""Codes a row gets again when it is paid again unchanged: the service refuses what the row says (its number,
its amount, its currency) or the account itself, not a passing state (a limit reached today, a timeout, the
provider's funds). A retry preview flags such rows (`fails_again`) so a dead number is not retried twice."""


def fails_again(code: str | None) -> bool:
    """Whether a row that failed with ``code`` fails again when retried as it is (`FAILS_AGAIN`)."""
    return code in FAILS_AGAIN


def failure_words(code: str | None) -> FailureWords:
    """The words and next step of ``code``; a code the table lacks (the spec's enums are open) is named as
    it is, with support as the next step."""
    if not code:
        return FailureWords("The service gave no reason.", _SUPPORT)
    found = FAILURE_WORDS.get(code)
    if found is not None:
        return found
    return FailureWords(f"The service gave the code {code}.", _SUPPORT)


def retried_next_step(retry_label: str) -> str:
    """The next step of a failed row that a retry run claimed: it pays the row again."""
    return f"Nothing: retry run {retry_label} pays this row again; follow that run."
