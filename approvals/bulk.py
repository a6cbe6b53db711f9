"""Bulk actions: apply one run action to a selection of runs or to everything a filter matches.

The confirm step comes first (bulk_count, bulk_preview: each run, and per run the tool
calls the action will run again or undo with their effect class, or why it is refused), a
reason is required, an action that cannot be undone needs its word typed, and every run
gets its own result: done (and what it did), refused (and why: nothing changed), or error
(the action started and failed). Each run is acted on in its own transaction, so one refusal
never undoes the others; every Intervention row of one bulk action carries the same bulk id.
Everything about a verb comes from its action in the registry (BULK_ACTIONS).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from agentops import clock
from agentops.errors import AgentOpsError, InvalidInput
from approvals.actions import BULK_ACTIONS
from approvals.actions.base import Action
from approvals.actions.params import params_validate
from approvals.errors import ActionNotApplicable, NotAllowed
from approvals.roles import has_role, team_ids_for
from runs.models import Run
from runs.scope import Teams, scoped

BULK_LIMIT = 1000
PREVIEW_LIMIT = 50  # runs the confirm page lists one by one (the count covers the rest)
DONE, REFUSED, ERROR, SKIPPED = "done", "refused", "error", "skipped"
# Refusals change nothing: the role, the run's state, or the input said no before any write.
_REFUSALS = (PermissionDenied, ActionNotApplicable, InvalidInput)


@dataclass
class BulkLine:
    """One run of the confirm page: what the action will do to it, or why it is refused."""

    run: Run
    refusal: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)


def bulk_count(*, teams: Teams, run_ids: Iterable[Any] | None = None,
               queryset: QuerySet[Run] | None = None) -> int:
    """Return how many runs of ``teams`` a bulk action on this selection would touch."""
    return _selection(run_ids, queryset, teams).count()


def bulk_preview(*, verb: str, actor: Any, teams: Teams, run_ids: Iterable[Any] | None = None,
                 queryset: QuerySet[Run] | None = None,
                 limit: int = PREVIEW_LIMIT) -> list[BulkLine]:
    """Return the first ``limit`` selected runs with what ``verb`` would do to each.

    Without a (known) verb the lines list the runs only.
    """
    action = BULK_ACTIONS.get(verb)
    runs = _selection(run_ids, queryset, teams).order_by("created_at", "id")[:limit]
    if action is None:
        return [BulkLine(run) for run in runs]
    lines = []
    for run in runs:
        refusal = action.refusal(actor, run)
        lines.append(BulkLine(run, refusal, [] if refusal else action.preview(run)))
    return lines


def bulk_apply(*, verb: str, actor: Any, reason: str, teams: Teams,
               run_ids: Iterable[Any] | None = None,
               queryset: QuerySet[Run] | None = None, params: dict[str, Any] | None = None,
               confirm: str = "") -> list[dict[str, Any]]:
    """Apply ``verb`` to each selected run of ``teams``; return one {run_id, goal, outcome,
    detail, status} per run. Raise before touching any run when the verb, reason, role,
    confirmation or selection is wrong. Runs of a team where ``actor`` lacks the action's
    role are skipped (outcome "skipped", saying so) and never touched."""
    action = BULK_ACTIONS.get(verb)
    if action is None:
        raise InvalidInput(f"no bulk action {verb!r}; known: {', '.join(BULK_ACTIONS)}")
    if not (reason or "").strip():
        raise InvalidInput("a reason is required for a bulk action")
    if not has_role(actor, *action.roles):
        raise NotAllowed(f"bulk {verb.replace('_', ' ')} needs the {' or '.join(action.roles)} "
                         "role; nothing was changed")
    rule = action.confirmation(None)
    if rule is not None:
        rule.check(confirm, action=verb)
    params = params_validate(verb, action.params, params or {})
    runs = _selection(run_ids, queryset, teams)
    count = runs.count()
    if count > BULK_LIMIT:
        raise InvalidInput(f"{count} runs match; narrow the selection to {BULK_LIMIT} or fewer")
    bulk_id = clock.new_id("bulk")
    allowed = team_ids_for(actor, *action.roles)
    return [_one(action, run, actor, reason, bulk_id, {**params, "confirm": confirm})
            if allowed is None or run.team_id in allowed else _skipped(action, run)
            for run in runs.select_related("team").order_by("created_at", "id")]


def _skipped(action: Action, run: Run) -> dict[str, Any]:
    roles = " or ".join(action.roles)
    return {"run_id": run.pk, "goal": run.goal[:200], "outcome": SKIPPED, "status": run.status,
            "detail": f"skipped: you do not hold the {roles} role in team {run.team.slug}; "
                      "nothing was changed"}


def _one(action: Action, run: Run, actor: Any, reason: str, bulk_id: str,
         params: dict[str, Any]) -> dict[str, Any]:
    line = {"run_id": run.pk, "goal": run.goal[:200]}
    refusal = action.refusal(actor, run)
    if refusal:
        return {**line, "outcome": REFUSED, "detail": refusal, "status": run.status}
    plan = action.preview(run)
    try:
        action.execute(actor, run, reason, bulk=bulk_id, **params)
    except _REFUSALS as exc:
        return {**line, "outcome": REFUSED, "detail": getattr(exc, "message", str(exc)),
                "status": run.status}
    except AgentOpsError as exc:
        return {**line, "outcome": ERROR, "detail": exc.message, "status": _status(run)}
    return {**line, "outcome": DONE, "detail": done_text(action, plan), "status": _status(run)}


def done_text(action: Action, plan: list[dict[str, Any]]) -> str:
    """Return what a done action did to the run's tool calls ("lookup (read): runs again")."""
    if not plan:
        return f"{action.label}: done; no tool call runs again or is undone"
    return "; ".join(f"{c['tool']} ({c['effect_class']}): {c['will']}" for c in plan[:10]) + (
        f"; and {len(plan) - 10} more" if len(plan) > 10 else "")


def _status(run: Run) -> str:
    return Run.objects.filter(pk=run.pk).values_list("status", flat=True).first() or ""


def _selection(run_ids: Iterable[Any] | None, queryset: QuerySet[Run] | None,
               teams: Teams) -> QuerySet[Run]:
    """Return the selected runs inside ``teams`` (an id of another team's run selects nothing)."""
    if (run_ids is None) == (queryset is None):
        raise InvalidInput("select runs by id or by a filter (exactly one of them)")
    if queryset is not None:
        return scoped(queryset, teams)
    return scoped(Run.objects.filter(pk__in=list(run_ids)), teams)
