"""Operator actions and approval decisions, one module per verb; ACTIONS maps verb -> action."""
from __future__ import annotations

from approvals.actions import (
    approve,
    confirm,
    edit_args,
    raise_budget,
    reject,
    resume,
    retry,
    rollback,
    skip,
    terminate,
)
from approvals.actions.base import Action

ACTIONS: dict[str, Action] = {a.verb: a for a in (
    retry.ACTION, skip.ACTION, rollback.ACTION, terminate.ACTION, confirm.CONFIRM_EXECUTED,
    confirm.CONFIRM_NOT_EXECUTED, resume.ACTION, raise_budget.ACTION, approve.ACTION,
    reject.ACTION, edit_args.ACTION,
)}
RUN_ACTIONS = {v: a for v, a in ACTIONS.items() if a.name.startswith("run.")}
APPROVAL_ACTIONS = {v: a for v, a in ACTIONS.items() if a.name.startswith("approval.")}


def action_get(verb: str) -> Action:
    """Return the action for ``verb`` (KeyError names the known verbs)."""
    try:
        return ACTIONS[verb]
    except KeyError:
        raise KeyError(f"no action {verb!r}; known: {', '.join(ACTIONS)}") from None
