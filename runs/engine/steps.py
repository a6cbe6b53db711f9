"""The Step rows: the per-step projection the console's timeline reads, kept with the events."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentops import clock
from agentops.writes import RowsUpdate
from runs.engine.events import NewEvent
from runs.models import Step

_STATUS = {"step.started": "running", "step.completed": "succeeded", "step.skipped": "skipped",
           "step.reset": "pending"}


def step_rows_writers(run_id: Any, events: Sequence[NewEvent],
                      state: dict[str, Any]) -> list[Callable[[], Any]]:
    """Return the writers updating the Step rows these events touch (none when none do)."""
    plans = [e for e in events if e.type == "plan.accepted"]
    changes: dict[str, dict[str, Any]] = {}
    now = clock.now()
    for e in events:
        key = e.data.get("step") if e.type.startswith("step.") else None
        if key is None or key.startswith("_"):
            continue
        st = state["steps"].get(key, {})
        fields = changes.setdefault(key, {})
        fields["status"] = _STATUS.get(e.type) or e.data.get("status", "failed")
        fields["retry_count"] = st.get("retries", 0)
        if e.type == "step.started":
            fields["started_at"] = now
        if e.type in ("step.completed", "step.skipped"):
            fields.update(finished_at=now, output=st.get("output"), error_class="")
        if e.type == "step.failed":
            fields.update(error_class=e.data.get("error_class", ""), finished_at=now)
    updates = [RowsUpdate(Step, {"run_id": run_id, "key": key}, fields)
               for key, fields in changes.items()]
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
