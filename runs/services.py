"""Public run services: start, cancel, signal, fork. Views, the API and the CLI call these."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agentops import clock
from agentops.errors import AgentOpsError
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.exceptions import exceptions_resolve, run_exceptions_at_end
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.start import actor_name, run_start
from runs.engine.runtime.transition import run_transition
from runs.errors import IllegalTransition
from runs.event_types import EventType
from runs.models import Run
from runs.services_cancel import run_cancel_writes
from runs.services_signals import run_fork, run_signal
from runs.statuses import TERMINAL, RunStatus

# Starting and enqueueing live in the engine's runtime (a wait starts child runs); signals and
# forks in their own module: re-exported so callers find every run service here.
__all__ = ["run_cancel", "run_enqueue", "run_fork", "run_signal", "run_start"]


def run_cancel(*, run: Run, actor: Any = None, reason: str = "",
               parent: Run | None = None) -> Run:
    """Cancel a run and everything hanging off it; late results never turn it green.

    In one transaction: the run goes ``cancelled``, its pending approvals go stale, its
    ledger calls that will never run are closed (a call in flight becomes ``unknown`` with
    its attempt closed, unless its worker still reports a late result), and each live child
    run is cancelled the same way with an event saying it was its parent.
    """
    if run.status in TERMINAL:
        raise IllegalTransition("run", run.status, RunStatus.CANCELLED)
    who = actor_name(actor)
    data: dict[str, Any] = {"reason": reason}
    if parent is not None:
        data["parent"] = str(parent.pk)
    with transaction.atomic():
        run_transition(run, RunStatus.CANCELLED, reason="cancelled", detail=reason[:500],
                       actor=who, fields={"cancel_requested": True,
                                          "exceptions": _exceptions_at_cancel(run, who, reason)},
                       events=[NewEvent(EventType.RUN_CANCELLED, data, actor=who)],
                       also=run_cancel_writes(run, reason))
        for child in Run.objects.filter(parent=run).exclude(status__in=list(TERMINAL)):
            run_cancel(run=child, actor=actor, parent=run,
                       reason=f"its parent run {run.pk} was cancelled: {reason}"[:500])
    return run


def _exceptions_at_cancel(run: Run, who: str, reason: str) -> list[dict[str, Any]]:
    """Return what the cancelled run carries: what it gathered so far, then the cancel itself.

    A cancelled run keeps its exceptions (a compensated refund, a rollback, a call nobody
    confirmed) on ``Run.exceptions``, as a run that completed with exceptions does.
    """
    try:
        state = load_state(run)
    except (KeyError, TypeError, AgentOpsError):
        state = {}  # a log this code cannot fold still cancels; the ledger still speaks
    ended = {"kind": "cancelled", "by": who, "why": reason[:2000],
             "when": clock.now().isoformat()}
    return [*run_exceptions_at_end(run.pk, state), *exceptions_resolve(run.pk, [ended])]
