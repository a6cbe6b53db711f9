"""The recommendation as one viewer sees it: a button they can press, or who can press it.

The stored recommendation is the same for everyone (the queue groups by it); the panel asks
here, per viewer, whether the recommended button is theirs to press (the action's check()
with their roles and the run's current status). When it is not, the panel says who can
("Ask an admin to press Raise budget") instead of showing a button they do not have.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied

from approvals.actions import ACTIONS
from approvals.actions.base import bind
from approvals.roles import ADMIN, OPERATOR, SUPPORT, has_role

WAIT = "wait"
_WHO = {ADMIN: "an admin", OPERATOR: "an operator", SUPPORT: "someone in support"}


@dataclass(frozen=True)
class Option:
    """One action a viewer could take, with its console label."""

    verb: str
    label: str
    pressable: bool


@dataclass(frozen=True)
class Advice:
    """What the panel shows: the headline, the why, the button (if any) and who can act."""

    verb: str
    label: str
    headline: str
    why: str
    button: str  # the verb to highlight; "" when this viewer has nothing to press
    who_can: str  # who can press it when this viewer cannot
    alternatives: tuple[Option, ...]


def label_of(verb: str) -> str:
    """Return the console label of ``verb`` (its action's label)."""
    if verb == WAIT:
        return "Let it wait"
    action = ACTIONS.get(verb)
    return action.label if action is not None and action.label else verb.replace("_", " ")


def can_press(verb: str, run: Any, user: Any) -> bool:
    """Return True when ``user`` may press ``verb`` on ``run`` now (check() passes)."""
    if verb not in ACTIONS:
        return False
    try:
        bind(ACTIONS[verb], user=user, run=run).check()
    except PermissionDenied:
        return False
    return True


def who_can(verb: str) -> str:
    """Return who may press ``verb`` ("an admin", "an operator" ...)."""
    action = ACTIONS.get(verb)
    if action is None:
        return ""
    return " or ".join(_WHO.get(r, r) for r in action.roles)


def advice_for(*, run: Any, user: Any) -> Advice | None:
    """Return the run's recommendation for this viewer (None when there is none)."""
    verb = run.recommended_action
    if not verb:
        return None
    alts = tuple(Option(v, label_of(v), can_press(v, run, user))
                 for v in (run.recommended_alternatives or []) if v in ACTIONS)
    label, why = label_of(verb), run.recommendation_why
    if verb == WAIT:
        return Advice(verb, label, "No action needed: it retries by itself", why, "", "", alts)
    if can_press(verb, run, user):
        return Advice(verb, label, label, why, verb, "", alts)
    action = ACTIONS.get(verb)
    if action is not None and not has_role(user, *action.roles, team=run.team_id):
        who = who_can(verb)
        return Advice(verb, label, f"Ask {who} to press {label}", why, "", who, alts)
    return Advice(verb, label, f"{label} is not available on this run right now", why, "",
                  "", alts)
