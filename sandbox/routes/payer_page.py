"""The payer page behind a checkout ``url`` (``/pay/{token}``): a small HTML form, not part of the API."""

from __future__ import annotations

import html
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ..engine.checkouts import PAYER_PROVIDERS, find_by_token, pay
from ..errors import ApiError
from ..money import fmt
from ..resources import CheckoutRecord
from ..runtime import get_sandbox
from .checkouts import ensure_configured

router = APIRouter(include_in_schema=False)

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Pay {business}</title>
<style>body{{font-family:sans-serif;max-width:28rem;margin:2rem auto}}label{{display:block;margin:.6rem 0}}
.err{{color:#b00}}.ok{{color:#070}}</style></head><body>
<h1>Pay {business}</h1><p>{description}</p><p>Reference <b>{reference}</b> · {amount_text}</p>
{message}{form}</body></html>"""


def _amount_text(c: CheckoutRecord) -> str:
    if c.amount_type == "fixed" and c.amount is not None:
        return f"{c.currency} {fmt(c.amount)}"
    low = fmt(c.min_amount) if c.min_amount is not None else "any"
    high = fmt(c.max_amount) if c.max_amount is not None else "any"
    return f"{c.currency}, amount of your choice ({low} to {high})"


def _form(c: CheckoutRecord, token: str) -> str:
    if c.status != "open":
        return f"<p>This payment link is <b>{html.escape(c.status)}</b>.</p>"
    options = "".join(f'<option value="{p}">{p}</option>' for p in PAYER_PROVIDERS)
    amount = ""
    if c.amount_type == "open":
        hints = " ".join(fmt(a) for a in c.suggested_amounts)
        amount = '<label>Amount <input name="amount" inputmode="decimal" required></label>' + (
            f"<p>Suggested: {html.escape(hints)}</p>" if hints else ""
        )
    cancel = f' <a href="{html.escape(c.cancel_url)}">Cancel</a>' if c.cancel_url else ""
    return (
        f'<form method="post" action="/pay/{html.escape(token)}"><label>Provider <select name="provider">'
        f'{options}</select></label><label>Mobile money number <input name="msisdn" required '
        f'placeholder="233241234567"></label>{amount}<button type="submit">Pay</button>{cancel}</form>'
    )


def _page(request: Request, token: str, message: str = "", status: int = 200) -> HTMLResponse:
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    with sandbox.state.lock:
        found = find_by_token(list(sandbox.state.envs.values()), token)
        if found is None:
            return HTMLResponse("<h1>Payment link not found</h1>", status_code=404)
        env, checkout = found
        sandbox.state.advance(env)
        text = PAGE.format(
            business=html.escape(env.business.name),
            description=html.escape(checkout.description or ""),
            reference=html.escape(checkout.reference),
            amount_text=html.escape(_amount_text(checkout)),
            message=message,
            form=_form(checkout, token),
        )
    return HTMLResponse(text, status_code=status)


@router.get("/pay/{token}")
async def payer_page(request: Request, token: str) -> HTMLResponse:
    """The form: provider, number and (open checkouts) amount."""
    return _page(request, token)


@router.post("/pay/{token}")
async def payer_pays(request: Request, token: str) -> HTMLResponse:
    """Start the payment (a collection); the payer approves the prompt on the phone."""
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    with sandbox.state.lock:
        found = find_by_token(list(sandbox.state.envs.values()), token)
        if found is None:
            return HTMLResponse("<h1>Payment link not found</h1>", status_code=404)
        env, checkout = found
        sandbox.state.advance(env)
        try:
            attempt = pay(
                env,
                checkout,
                form.get("provider", ""),
                form.get("msisdn", ""),
                form.get("amount"),
                sandbox.clock.now(),
                sandbox.config.delivery_delay_s,
            )
        except ApiError as err:
            message = f'<p class="err">{html.escape(err.message)}</p>'
            return _page(request, token, message, status=err.status if err.status < 500 else 400)
        back = (
            f' <a href="{html.escape(checkout.success_url)}">Back to the merchant</a>'
            if checkout.success_url
            else ""
        )
    message = (
        f'<p class="ok">Approve the prompt on {html.escape(attempt.payer)} to pay '
        f"{checkout.currency} {fmt(attempt.amount)} (payment {attempt.collection_reference}).{back}</p>"
    )
    return _page(request, token, message, status=202)
