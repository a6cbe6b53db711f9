"""What an operator can press: every action by verb, and the ones a user may press on a run.

This is the one list: the console's buttons and dialogs, the queue's bulk form, the REST
endpoints and their OpenAPI schemas all read it. Adding a verb is one module in this folder
(an Action subclass with its label, help, statuses, roles, params, check/perform/preview)
plus its line here.
"""
from __future__ import annotations

from typing import Any

from approvals.actions import (
    approve,
    confirm,
    edit_args,
    edit_plan,
    finish_partial,
    fork_deployed,
    raise_budget,
    reject,
    restart,
    resume,
    retry,
    rollback,
    skip,
    terminate,
    wake,
)
from approvals.actions.base import Action
from approvals.errors import UnknownAction

# In button order: a run shows the ones that apply, the recommended one first.
ACTIONS: dict[str, Action] = {a.verb: a for a in (
    raise_budget.ACTION, resume.ACTION, retry.ACTION, skip.ACTION,
    confirm.CONFIRM_EXECUTED, confirm.CONFIRM_NOT_EXECUTED, fork_deployed.ACTION, wake.ACTION,
    edit_plan.ACTION, rollback.ACTION, rollback.TERMINATE, restart.ACTION, finish_partial.ACTION,
    terminate.ACTION, approve.ACTION, reject.ACTION,
    edit_args.ACTION,
)}
RUN_ACTIONS = {v: a for v, a in ACTIONS.items() if a.target == "run"}
APPROVAL_ACTIONS = {v: a for v, a in ACTIONS.items() if a.target == "approval"}
BULK_ACTIONS = {v: a for v, a in RUN_ACTIONS.items() if a.bulk}


def action_for(verb: str) -> Action:
    """Return the action named ``verb``; UnknownAction (404) names the known verbs."""
    try:
        return ACTIONS[verb]
    except KeyError:
        raise UnknownAction(f"no action {verb!r}; known: {', '.join(ACTIONS)}",
                            verb=verb) from None


def actions_for(run: Any, user: Any) -> list[Action]:
    """Return the run actions ``user`` may press on ``run`` now (check() passes): the
    recommended one first, then its alternatives in order, then in button order."""
    offered = [a for a in RUN_ACTIONS.values() if not a.refusal(user, run)]
    order = [run.recommended_action, *(run.recommended_alternatives or [])]
    rank = {v: i for i, v in enumerate(dict.fromkeys(order))}
    offered.sort(key=lambda a: rank.get(a.verb, len(rank)))
    return offered
