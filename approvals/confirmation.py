"""High-risk approvals need a typed confirmation: the amount the call moves, or "approve".

A write that cannot be undone, or one that moves money, is never approved by one keypress:
the inbox shows a field for it and the decision endpoint refuses the decision without it
(runs/views/inbox.py), whatever the page's JavaScript did.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from approvals.errors import ConfirmationRequired
from ledger.statuses import Effect, Reversibility

CONFIRM_WORD = "approve"
HIGH_RISKS = frozenset({"high", "critical"})
# Argument names that carry money; the first one with a number is "the amount".
MONEY_KEYS = ("amount", "amount_eur", "amount_usd", "amount_cents", "total", "price", "refund")


def approval_amount(approval: Any) -> str:
    """Return the amount the proposed call moves, as its arguments spell it ("250"), or ""."""
    args = approval.proposed_args if isinstance(approval.proposed_args, dict) else {}
    for key in MONEY_KEYS:
        value = args.get(key)
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str) and _number(value) is not None:
            return value.strip()
    return ""


def approval_needs_confirmation(approval: Any) -> bool:
    """Return True for a high-risk approval: risk high/critical, an irreversible write, or a
    write that moves money."""
    call = approval.tool_call
    if approval.risk in HIGH_RISKS:
        return True
    if call is None or call.effect != Effect.WRITE:
        return False
    return call.reversibility == Reversibility.IRREVERSIBLE or bool(approval_amount(approval))


def confirmation_prompt(approval: Any) -> str:
    """Return what the operator must type: the amount when there is one, else the word."""
    amount = approval_amount(approval)
    return f"Type {amount} (the amount) or “{CONFIRM_WORD}” to approve" if amount \
        else f"Type “{CONFIRM_WORD}” to approve"


def confirmation_error(approval: Any, typed: str) -> str:
    """Return why ``typed`` does not confirm ``approval`` ("" when it does or none is needed)."""
    if not approval_needs_confirmation(approval):
        return ""
    text = (typed or "").strip()
    if text.lower() == CONFIRM_WORD:
        return ""
    amount = approval_amount(approval)
    if amount and text and _number(text) is not None and _number(text) == _number(amount):
        return ""
    what = f"the amount ({amount}) or “{CONFIRM_WORD}”" if amount else f"“{CONFIRM_WORD}”"
    if not text:
        return (f"{approval.tool} is a high-risk call: type {what} to confirm. "
                "Nothing was decided.")
    return f"“{text[:40]}” does not confirm {approval.tool}: type {what}. Nothing was decided."


def confirmation_check(approval: Any, typed: str) -> None:
    """Raise ConfirmationRequired (422) unless ``typed`` confirms ``approval``."""
    error = confirmation_error(approval, typed)
    if error:
        raise ConfirmationRequired(error, approval=approval.pk)


def _number(text: str) -> Decimal | None:
    cleaned = re.sub(r"[^\d.\-]", "", str(text).replace(",", ""))
    try:
        return Decimal(cleaned) if cleaned else None
    except InvalidOperation:
        return None
