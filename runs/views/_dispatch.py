"""The one place the console calls operator actions, approval decisions and bulk work.

Views name a verb; this module binds the action from approvals.actions to the user and the
target, and turns refusals and conflicts into an Outcome the page can show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied

from agentops.errors import AgentOpsError
from approvals.actions import ACTIONS, APPROVAL_ACTIONS
from approvals.actions.base import Bound, bind
from approvals.bulk import bulk_apply
from runs.scope import Teams

APPROVAL_VERBS = tuple(APPROVAL_ACTIONS)


@dataclass
class Outcome:
    """What an action did, or why it was refused (``status`` is the HTTP status to answer)."""

    ok: bool = False
    error: str = ""
    status: int = 200
    result: Any = None
    results: list[dict[str, Any]] = field(default_factory=list)


def _action(verb: str, **kwargs: Any) -> Bound:
    return bind(ACTIONS[verb], **kwargs)


def allowed(verb: str, **kwargs: Any) -> bool:
    """Return whether the user may press ``verb`` on this target now (its check() passes)."""
    try:
        _action(verb, **kwargs).check()
    except PermissionDenied:
        return False
    return True


def preview(verb: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Return the tool calls ``verb`` would run again (or undo), with their effect class."""
    return list(_action(verb, **kwargs).preview())


def perform(verb: str, **kwargs: Any) -> Outcome:
    """Run ``verb`` (check then execute) and translate refusals and conflicts for the page."""
    try:
        return Outcome(ok=True, result=_action(verb, **kwargs).execute())
    except PermissionDenied as exc:
        return Outcome(error=str(exc) or "Not allowed.", status=403)
    except AgentOpsError as exc:
        return Outcome(error=exc.message, status=exc.http_status)


def bulk(*, verb: str, run_ids: list[str] | None, queryset: Any, user: Any,
         reason: str, teams: Teams, confirm: str = "") -> Outcome:
    """Apply ``verb`` to runs by id or to a whole filter; one result per run."""
    try:
        results = bulk_apply(verb=verb, run_ids=run_ids, queryset=queryset, actor=user, teams=teams,
                             reason=reason, confirm=confirm)
    except PermissionDenied as exc:
        return Outcome(error=str(exc) or "Not allowed.", status=403)
    except AgentOpsError as exc:
        return Outcome(error=exc.message, status=exc.http_status)
    return Outcome(ok=True, results=list(results))
