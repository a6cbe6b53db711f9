"""Shared parts of the operator services: lock and check a run, append events, requeue it."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from approvals.errors import ActionNotApplicable
from runs.engine import reducer
from runs.engine.events import NewEvent
from runs.engine.session import state_projection
from runs.engine.snapshots import load_state
from runs.engine.transition import run_transition
from runs.models import Run
from runs.statuses import RunStatus

ROLLBACK_OWNER = "rollback:"


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
        if run.status not in statuses:
            raise ActionNotApplicable(
                f"cannot {verb} a run that is {run.status} (only when {' or '.join(statuses)})",
                status=run.status)
        if run.lease_owner.startswith(ROLLBACK_OWNER) and verb != "roll back":
            raise ActionNotApplicable(f"a rollback by {run.lease_owner[len(ROLLBACK_OWNER):]} "
                                      "is in progress on this run; wait for it")
        yield load_state(run.pk)




def requeue(run: Run, state: dict[str, Any], events: list[NewEvent], *, reason: str,
            actor: str, detail: str = "", also: Sequence[Callable[[], Any]] = (),
            fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append ``events``, move the run to queued and enqueue it; return the new state."""
    from runs.services import run_enqueue

    new = reducer.fold(state, [{"seq": run.last_seq + i + 1, "type": e.type, "data": e.data}
                               for i, e in enumerate(events)])
    values = {**state_projection(new), "current_tool_call": "", **(fields or {})}
    run_transition(run, RunStatus.QUEUED, reason=reason, detail=detail[:500], actor=actor,
                   events=events, fields=values, also=list(also))
    run_enqueue(run.pk)
    return new


