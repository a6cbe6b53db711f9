"""The Step rows: the per-step projection the console's timeline reads, kept with the events.

``step_rows_writers`` is the only writer of ``Step.status``: it walks a unit's step events
from each step's status before the unit, checks every move against ``STEP_TRANSITIONS`` in
Python (no extra query on the hot path) and raises IllegalTransition on an illegal one.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentops import clock
from agentops.writes import RowsUpdate
from runs.engine.runtime.events import NewEvent
from runs.errors import IllegalTransition
from runs.event_types import EventType
from runs.models import Step
from runs.statuses import StepStatus, step_can_move

# Step events that say something about a step without changing its status.
_NOT_A_STATUS = frozenset({"step.incomplete"})
_STEP_OR_PLAN = ("step.", "plan.")  # the prefixes of the events that write Step rows
_STATUS = {"step.started": StepStatus.RUNNING, "step.completed": StepStatus.SUCCEEDED,
           "step.skipped": StepStatus.SKIPPED, "step.reset": StepStatus.PENDING}


def step_statuses(state: dict[str, Any], events: Sequence[NewEvent]) -> dict[str, str]:
    """Return the status (in ``state``) of each step ``events`` touch: the unit's start point."""
    return {k: state["steps"].get(k, {}).get("status", StepStatus.PENDING)
            for k in _touched(events)}


def step_move(key: str, src: str, event: NewEvent) -> str:
    """Return the status ``event`` moves step ``key`` to from ``src``; raise if illegal."""
    if event.type == EventType.STEP_RETRYING:
        return src  # the step is still being worked on; only its retry count changes
    dst = _STATUS.get(event.type) or event.data.get("status", StepStatus.FAILED)
    if dst != src and not step_can_move(src, dst):
        raise IllegalTransition(f"step {key}", src, dst)
    return dst


def _touched(events: Sequence[NewEvent]) -> set[str]:
    return {e.data["step"] for e in events if e.type.startswith("step.")
            and not str(e.data.get("step", "_")).startswith("_")}


def _about_steps(events: Sequence[NewEvent]) -> bool:
    """Return whether any of ``events`` is a step or plan event (only those write Step rows)."""
    for e in events:  # a loop, not any() over a generator: one frame, most units have none
        if e.type.startswith(_STEP_OR_PLAN):
            return True
    return False


def _step_fields(fields: dict[str, Any], e: NewEvent, st: dict[str, Any], now: Any) -> None:
    """Add to ``fields`` the Step columns event ``e`` sets (``st``: the step's state after)."""
    fields["retry_count"] = st.get("retries", 0)
    if e.type == EventType.STEP_STARTED:
        fields["started_at"] = now
    if e.type in (EventType.STEP_COMPLETED, EventType.STEP_SKIPPED):
        fields.update(finished_at=now, output=st.get("output"), error_class="")
    if e.type == EventType.STEP_FAILED:
        fields.update(error_class=e.data.get("error_class", ""), finished_at=now)


def step_rows_writers(run_id: Any, events: Sequence[NewEvent], state: dict[str, Any],
                      before: dict[str, str] | None = None) -> list[Callable[[], Any]]:
    """Return the writers updating the Step rows these events touch (none when none do).

    ``state`` is the run's state after the events; ``before`` each touched step's status
    before them (``step_statuses``); each move is checked against the step transition table.
    """
    if not _about_steps(events):  # most units (a reply, its results): no clock read, no lists
        return []
    plans = [e for e in events if e.type == EventType.PLAN_ACCEPTED]
    edits = [e for e in events if e.type == EventType.PLAN_EDITED]
    current = dict(before or {})
    changes: dict[str, dict[str, Any]] = {}
    now = clock.now()
    for e in events:
        key = e.data.get("step") if e.type.startswith("step.") else None
        if key is None or key.startswith("_") or e.type in _NOT_A_STATUS:
            continue
        fields = changes.setdefault(key, {})
        current[key] = fields["status"] = step_move(key, current.get(key, StepStatus.PENDING), e)
        _step_fields(fields, e, state["steps"].get(key, {}), now)
    updates = [RowsUpdate(Step, {"run_id": run_id, "key": key}, fields)
               for key, fields in changes.items()]
    if edits:
        updates = [*updates, *(_plan_rows_edit(run_id, e) for e in edits)]
    if not plans:
        return updates

    def write() -> None:
        for plan in plans:
            Step.objects.filter(run_id=run_id).delete()
            Step.objects.bulk_create([
                Step(run_id=run_id, key=s["key"], position=i, title=s.get("title", s["key"]),
                     depends_on=s.get("depends_on", []), input=s.get("input", {}))
                for i, s in enumerate(plan.data["steps"])])
        for update in updates:
            update()

    return [write]


def _plan_rows_edit(run_id: Any, edit: NewEvent) -> Callable[[], Any]:
    """Return the writer that makes the Step rows follow an edited plan (statuses untouched)."""
    def write() -> None:
        Step.objects.filter(run_id=run_id, key__in=edit.data.get("removed", [])).delete()
        rows = {r.key: r for r in Step.objects.filter(run_id=run_id)}
        for i, s in enumerate(edit.data["steps"]):
            values = {"position": i, "title": s.get("title", s["key"]),
                      "depends_on": s.get("depends_on", []), "input": s.get("input", {})}
            if s["key"] in rows:
                Step.objects.filter(pk=rows[s["key"]].pk).update(**values)
            else:
                Step.objects.create(run_id=run_id, key=s["key"], **values)

    return write
