"""The one place the console calls operator actions, approval decisions and bulk work.

The actions live in approvals.actions (one module per verb, with check()/execute()); this
adapter finds them by name so the console can ship before they do, and shows "not available
yet" instead of failing while a module is missing.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

RUN_VERBS = ("retry", "skip", "rollback", "terminate", "confirm_executed",
             "confirm_not_executed", "resume", "raise_budget")
APPROVAL_VERBS = ("approve", "reject", "edit_args")
_MODULES = {"confirm_executed": ("confirm_executed", "confirm"),
            "confirm_not_executed": ("confirm_not_executed", "confirm")}


@dataclass
class Outcome:
    """What an action did: ``unavailable`` when its module does not exist yet."""

    ok: bool = False
    unavailable: bool = False
    error: str = ""
    status: int = 200
    result: Any = None
    results: list[dict[str, Any]] = field(default_factory=list)


def _module(verb: str) -> ModuleType | None:
    for name in _MODULES.get(verb, (verb,)):
        try:
            return importlib.import_module(f"approvals.actions.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"approvals.actions.{name}":
                raise
    return None


def _action(verb: str, **kwargs: Any) -> Any | None:
    """Return the action object for ``verb`` bound to ``kwargs``, or None if not built yet."""
    module = _module(verb)
    factory = getattr(module, "action_for", None) or getattr(module, "ACTION", None)
    if module is None or factory is None:
        return None
    return factory(verb=verb, **kwargs) if callable(factory) else factory


def allowed(verb: str, **kwargs: Any) -> bool | None:
    """Return whether check() passes (None when the action is not built yet)."""
    from django.core.exceptions import PermissionDenied

    action = _action(verb, **kwargs)
    if action is None:
        return None
    try:
        action.check()
    except PermissionDenied:
        return False
    return True


def preview(verb: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Return the tool calls ``verb`` would run again (or undo), with their effect class."""
    action = _action(verb, **kwargs)
    return list(action.preview()) if action is not None and hasattr(action, "preview") else []


def perform(verb: str, **kwargs: Any) -> Outcome:
    """Run ``verb`` (check then execute) and translate refusals and conflicts for the page."""
    from django.core.exceptions import PermissionDenied

    from agentops.errors import AgentOpsError

    action = _action(verb, **kwargs)
    if action is None:
        return Outcome(unavailable=True, status=503,
                       error=f"The {verb.replace('_', ' ')} action is not available yet.")
    try:
        return Outcome(ok=True, result=action.execute())
    except PermissionDenied as exc:
        return Outcome(error=str(exc) or "Not allowed.", status=403)
    except AgentOpsError as exc:
        return Outcome(error=exc.message, status=exc.http_status)


def bulk(*, verb: str, run_ids: list[str] | None, queryset: Any, user: Any,
         reason: str) -> Outcome:
    """Apply ``verb`` to runs by id or to a whole filter, via the bulk service when it exists."""
    from django.core.exceptions import PermissionDenied

    from agentops.errors import AgentOpsError

    try:
        service = importlib.import_module("approvals.bulk")
    except ModuleNotFoundError as exc:
        if exc.name != "approvals.bulk":
            raise
        return Outcome(unavailable=True, status=503,
                       error="Bulk actions are not available yet; nothing was changed.")
    try:
        results = service.bulk_apply(verb=verb, run_ids=run_ids, queryset=queryset,
                                     actor=user, reason=reason)
    except PermissionDenied as exc:
        return Outcome(error=str(exc) or "Not allowed.", status=403)
    except AgentOpsError as exc:
        return Outcome(error=exc.message, status=exc.http_status)
    return Outcome(ok=True, results=list(results))
