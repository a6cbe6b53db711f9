"""Bulk actions: apply one run action to a selection of runs or to everything a filter matches.

The count comes first (bulk_count), a reason is required, and every run gets its own result:
done, or refused and why. Each run is acted on in its own transaction, so one refusal never
undoes the others; every Intervention row of one bulk action carries the same bulk id.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from agentops import clock
from agentops.errors import AgentOpsError, InvalidInput
from approvals.actions import BULK_ACTIONS
from approvals.actions.params import params_validate
from approvals.errors import NotAllowed
from approvals.roles import has_role
from runs.models import Run

BULK_LIMIT = 1000


def bulk_count(*, run_ids: Iterable[Any] | None = None,
               queryset: QuerySet[Run] | None = None) -> int:
    """Return how many runs a bulk action on this selection would touch."""
    return _selection(run_ids, queryset).count()


def bulk_apply(*, verb: str, actor: Any, reason: str, run_ids: Iterable[Any] | None = None,
               queryset: QuerySet[Run] | None = None,
               params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Apply ``verb`` to each selected run; return one {run_id, outcome, detail} per run."""
    action = BULK_ACTIONS.get(verb)
    if action is None:
        raise InvalidInput(f"no bulk action {verb!r}; known: {', '.join(BULK_ACTIONS)}")
    if not (reason or "").strip():
        raise InvalidInput("a reason is required for a bulk action")
    if not has_role(actor, *action.roles):
        raise NotAllowed(f"bulk {verb.replace('_', ' ')} needs the {' or '.join(action.roles)} "
                         "role; nothing was changed")
    params = params_validate(verb, action.params, params or {})
    runs = _selection(run_ids, queryset)
    count = runs.count()
    if count > BULK_LIMIT:
        raise InvalidInput(f"{count} runs match; narrow the selection to {BULK_LIMIT} or fewer")
    bulk_id = clock.new_id("bulk")
    return [_one(action, run, actor, reason, bulk_id, params)
            for run in runs.order_by("created_at", "id")]


def _one(action: Any, run: Run, actor: Any, reason: str, bulk_id: str,
         params: dict[str, Any]) -> dict[str, Any]:
    try:
        action.execute(actor, run, reason, bulk=bulk_id, **params)
    except (PermissionDenied, NotAllowed) as exc:
        return {"run_id": run.pk, "outcome": "refused", "detail": str(exc)}
    except AgentOpsError as exc:
        return {"run_id": run.pk, "outcome": "refused", "detail": exc.message}
    return {"run_id": run.pk, "outcome": "done", "detail": ""}


def _selection(run_ids: Iterable[Any] | None, queryset: QuerySet[Run] | None) -> QuerySet[Run]:
    if (run_ids is None) == (queryset is None):
        raise InvalidInput("select runs by id or by a filter (exactly one of them)")
    if queryset is not None:
        return queryset
    return Run.objects.filter(pk__in=list(run_ids))
