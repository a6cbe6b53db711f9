"""The checkpoints a rollback can restore, named by step: "before step 3 · refund_customer".

A rollback restores the state after any event between tool calls (runs.services_operator
.rollback). The natural points are step boundaries: the event just before a step started.
Each step's latest start is offered (after an earlier rollback a step starts again), newest
first, so an operator can go back past a refund to before the step that made it — not only
to the snapshot of the current state.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from runs.event_types import EventType
from runs.models import Run, Step
from runs.models.event import run_events

PLAN_STEP = "_plan"
_SCAN = 500  # step starts read, newest first; a run restarts its steps far fewer times


@dataclass(frozen=True)
class RollbackPoint:
    """The state just before a step started (the rollback's ``to_seq`` is ``seq``)."""

    seq: int
    step: str
    title: str
    number: int | None  # the step's place in the plan, 1-based (None: not in the plan)
    at: dt.datetime  # when the step started

    @property
    def label(self) -> str:
        """Return how a person reads it: "before step 3 · refund_customer"."""
        if self.step == PLAN_STEP:
            return "before planning"
        where = f"step {self.number}" if self.number else "step"
        title = f" ({self.title})" if self.title and self.title != self.step else ""
        return f"before {where} · {self.step}{title}"


def rollback_points(*, run: Run, limit: int = 30) -> list[RollbackPoint]:
    """Return the step boundaries a rollback of ``run`` can restore, newest first."""
    starts = (run_events(run).filter(type=EventType.STEP_STARTED, seq__lt=run.last_seq,
                                   seq__gt=1)
              .order_by("-seq").values_list("seq", "data", "at")[:_SCAN])
    steps = {s.key: s for s in Step.objects.filter(run=run).only("key", "title", "position")}
    points: list[RollbackPoint] = []
    seen: set[str] = set()
    for seq, data, at in starts:
        key = str((data or {}).get("step") or "")
        if not key or key in seen:
            continue
        seen.add(key)
        step = steps.get(key)
        points.append(RollbackPoint(seq=seq - 1, step=key, title=step.title if step else "",
                                    number=step.position + 1 if step else None, at=at))
        if len(points) >= limit:
            break
    return points
