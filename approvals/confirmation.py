"""Typed confirmations: what cannot be undone is never done by one click or one keypress.

A person types the word ("approve", "terminate", "rollback" ...) or, when money moves, the
amount. ``Typed`` is the one rule of what confirms; it serves two callers:

- high-risk approvals (risk high/critical, an irreversible write, or a write that moves
  money): the inbox shows the field and the decision endpoints refuse without it
  (runs/views/inbox.py, approvals/api.py);
- irreversible operator actions (an ``Action`` with a ``confirm_word``): ``Action.execute``
  refuses without it, so the console, bulk and the API all ask (approvals/actions/base.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from approvals.errors import ConfirmationRequired
from ledger.statuses import Effect, Reversibility

CONFIRM_WORD = "approve"
HIGH_RISKS = frozenset({"high", "critical"})
# Argument names that carry money; the first one with a number is "the amount".
MONEY_KEYS = ("amount", "amount_eur", "amount_usd", "amount_cents", "total", "price", "refund")


@dataclass(frozen=True)
class Typed:
    """What confirms one decision: ``word``, or ``amount`` when there is one.

    ``subject`` names what is confirmed in the messages ("refund", "Terminate"), ``risk``
    says why it asks ("is a high-risk call", "cannot be undone"), ``undone`` what a
    refusal leaves ("Nothing was decided.") and ``doing`` what the prompt says it does.
    """

    word: str
    amount: str = ""
    subject: str = ""
    risk: str = "cannot be undone"
    undone: str = "Nothing was changed."
    doing: str = ""  # what the prompt says it does ("roll back"); the word by default

    def prompt(self) -> str:
        """Return what the person must type ("Type 250 (the amount) or “approve” to approve")."""
        tail = f" to {self.doing or self.word}"
        return (f"Type {self.amount} (the amount) or “{self.word}”{tail}" if self.amount
                else f"Type “{self.word}”{tail}")

    def error(self, typed: str) -> str:
        """Return why ``typed`` does not confirm ("" when it does)."""
        text = (typed or "").strip()
        if text.lower() == self.word:
            return ""
        if self.amount and text and _number(text) is not None \
                and _number(text) == _number(self.amount):
            return ""
        what = (f"the amount ({self.amount}) or “{self.word}”" if self.amount
                else f"“{self.word}”")
        if not text:
            return f"{self.subject} {self.risk}: type {what} to confirm. {self.undone}"
        return f"“{text[:40]}” does not confirm {self.subject}: type {what}. {self.undone}"

    def check(self, typed: str, **details: Any) -> None:
        """Raise ConfirmationRequired (422) unless ``typed`` confirms."""

        error = self.error(typed)
        if error:
            raise ConfirmationRequired(error, word=self.word, amount=self.amount, **details)


def args_amount(args: Any) -> str:
    """Return the amount a call's arguments move, as they spell it ("250"), or ""."""
    args = args if isinstance(args, dict) else {}
    for key in MONEY_KEYS:
        value = args.get(key)
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str) and _number(value) is not None:
            return value.strip()
    return ""


def approval_amount(approval: Any, args: Any = None) -> str:
    """Return the amount the call will move ("250"), or "".

    ``args`` are the arguments that will execute when they differ from the proposal (edit
    and approve): the amount confirmed is always the one that will actually move.
    """
    return args_amount(approval.proposed_args if args is None else args)


def approval_needs_confirmation(approval: Any, args: Any = None) -> bool:
    """Return True for a high-risk approval: risk high/critical, an irreversible write, or a
    write that moves money (as proposed or as edited)."""
    call = approval.tool_call
    if approval.risk in HIGH_RISKS:
        return True
    if call is None or call.effect != Effect.WRITE:
        return False
    return (call.reversibility == Reversibility.IRREVERSIBLE or bool(approval_amount(approval))
            or bool(approval_amount(approval, args)))


def approval_typed(approval: Any, args: Any = None) -> Typed | None:
    """Return what confirms approving ``approval`` (run with ``args`` when edited), or None
    when it is not high-risk."""
    if not approval_needs_confirmation(approval, args):
        return None
    return Typed(CONFIRM_WORD, approval_amount(approval, args), subject=approval.tool,
                 risk="is a high-risk call", undone="Nothing was decided.")


def confirmation_prompt(approval: Any, args: Any = None) -> str:
    """Return what the operator must type: the amount when there is one, else the word."""
    typed = approval_typed(approval, args) or Typed(CONFIRM_WORD, approval_amount(approval, args))
    return typed.prompt()


def confirmation_error(approval: Any, typed: str, args: Any = None) -> str:
    """Return why ``typed`` does not confirm ``approval`` run with ``args`` ("" when it does
    or none is needed)."""
    rule = approval_typed(approval, args)
    return rule.error(typed) if rule is not None else ""


def confirmation_check(approval: Any, typed: str, args: Any = None) -> None:
    """Raise ConfirmationRequired (422) unless ``typed`` confirms ``approval`` run with
    ``args`` (the edited arguments, when edited)."""
    rule = approval_typed(approval, args)
    if rule is not None:
        rule.check(typed, approval=approval.pk)


def _number(text: str) -> Decimal | None:
    cleaned = re.sub(r"[^\d.\-]", "", str(text).replace(",", ""))
    try:
        return Decimal(cleaned) if cleaned else None
    except InvalidOperation:
        return None
