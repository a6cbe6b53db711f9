"""Shared parts of the operator services: lock and check a run, append events, requeue it."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from approvals.errors import ActionNotApplicable
from runs.engine.core import reducer
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.session import state_projection
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.steps import step_rows_writers, step_statuses
from runs.engine.runtime.transition import run_transition
from runs.models import Run
from runs.services_operator.rules import ROLLBACK_OWNER, rollback_refusal, status_refusal
from runs.statuses import RunStatus

__all__ = ["ROLLBACK_OWNER", "actor_name", "requeue", "run_locked", "state_projection"]


def actor_name(actor: Any) -> str:
    """Return the name an event or audit row records for ``actor``."""
    if actor is None:
        return ""
    return actor.get_username() if hasattr(actor, "get_username") else str(actor)


@contextmanager
def run_locked(run: Run, statuses: Sequence[str], verb: str) -> Iterator[dict[str, Any]]:
    """Lock ``run`` in a transaction, check its status, and yield its current state."""
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        run.refresh_from_db()
        refusal = status_refusal(run, statuses, verb)
        if refusal:
            raise ActionNotApplicable(refusal, status=run.status)
        refusal = rollback_refusal(run) if verb != "roll back" else ""
        if refusal:
            raise ActionNotApplicable(refusal)
        yield load_state(run)


def requeue(run: Run, state: dict[str, Any], events: list[NewEvent], *, reason: str,
            actor: str, detail: str = "", also: Sequence[Callable[[], Any]] = (),
            fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append ``events``, move the run to queued and enqueue it; return the new state."""
    new = reducer.fold(state, [{"seq": run.last_seq + i + 1, "type": e.type, "data": e.data}
                               for i, e in enumerate(events)])
    values = {**state_projection(new), "current_tool_call": "", **(fields or {})}
    steps = step_rows_writers(run.pk, events, new, step_statuses(state, events))
    run_transition(run, RunStatus.QUEUED, reason=reason, detail=detail[:500], actor=actor,
                   events=events, fields=values, also=[*also, *steps])
    run_enqueue(run.pk)
    return new


