"""Edit a run's plan: a person changes the steps not done yet, and the run goes on with them.

The remaining steps may be reordered, removed, added (from the agent's declared steps) and
given instructions the model reads in that step. Done steps (succeeded or skipped) are never
edited: they keep their place, first. A step's dependencies that no longer come before it
(removed, or moved after it) are dropped, so the order a person sets is the order that runs;
the diff says so. The edit is one ``plan.edited`` event with the new plan version; the open
calls of the steps not done are cancelled (the model asks again under the new plan), a step
that had started starts over, and the run is queued.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentops.agents import registry
from agentops.errors import InvalidInput
from approvals.errors import ActionNotApplicable
from approvals.statuses import ApprovalStatus
from approvals.transition import approvals_close_pending
from runs.engine.runtime.events import NewEvent
from runs.event_types import EventType
from runs.errors import UnknownAgent
from runs.models import Run
from runs.services_operator import rules
from runs.services_operator.common import actor_name, requeue, run_locked
from runs.services_operator.resolve import close_open_calls
from runs.statuses import RunStatus, StepStatus, WaitKind

DONE = (StepStatus.SUCCEEDED, StepStatus.SKIPPED)
MAX_INSTRUCTIONS = 4000


@dataclass(frozen=True)
class PlanEdit:
    """The plan an edit leads to, and how it differs from the current one."""

    steps: list[dict[str, Any]]  # the whole new plan, done steps first
    removed: list[str]
    reset: list[str]  # kept steps that had started: they start over
    diff: list[dict[str, Any]]  # one line per step: kept / moved / added / removed / edited


def declared_steps(run: Run) -> dict[str, dict[str, Any]]:
    """Return the agent's declared plan steps by key (what a person may add), or {}."""
    try:
        agent = registry.get(run.agent_name, run.agent_version)
    except UnknownAgent:
        return {}
    return {s.key: s.as_json() for s in agent.plan or ()}


def plan_remaining(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the plan steps not done yet, in order (what an edit starts from)."""
    return [s for s in state["plan"] if _status(state, s["key"]) not in DONE]


def plan_edit_build(*, run: Run, state: dict[str, Any],
                    steps: list[dict[str, Any]]) -> PlanEdit:
    """Return the edited plan for ``steps`` ({key, instructions?}); raise InvalidInput."""
    plan = {s["key"]: s for s in state["plan"]}
    done = [s for s in state["plan"] if _status(state, s["key"]) in DONE]
    remaining = plan_remaining(state)
    declared = declared_steps(run)
    wanted = _wanted(steps, plan, done, declared)
    new: list[dict[str, Any]] = [dict(s) for s in done]
    diff: list[dict[str, Any]] = []
    was = {s["key"]: i for i, s in enumerate(remaining)}
    for i, (key, instructions) in enumerate(wanted):
        step = dict(plan.get(key) or declared[key])
        old_text = step.get("instructions", "")
        if instructions is not None:
            step["instructions"] = instructions
        before = {s["key"] for s in new}
        deps = list(step.get("depends_on", []))
        step["depends_on"] = [d for d in deps if d in before]
        new.append(step)
        diff.append(_line(step, was.get(key), i, old_text, [d for d in deps if d not in before]))
    kept = {k for k, _ in wanted}
    removed = [s["key"] for s in remaining if s["key"] not in kept]
    diff += [{"step": k, "title": plan[k].get("title", k), "change": "removed", "was": was[k],
              "now": None, "instructions": "", "old_instructions": "", "dropped": []}
             for k in removed]
    reset = [k for k in kept if k in plan and _status(state, k) != StepStatus.PENDING]
    return PlanEdit(new, removed, reset, diff)


def _wanted(steps: list[dict[str, Any]], plan: dict[str, Any], done: list[dict[str, Any]],
            declared: dict[str, Any]) -> list[tuple[str, str | None]]:
    if not isinstance(steps, list) or not steps:
        raise InvalidInput("name at least one step to run; to end the run, terminate it or "
                           "finish it with partial results", field="steps")
    done_keys = {s["key"] for s in done}
    out: list[tuple[str, str | None]] = []
    for item in steps:
        key = str(item.get("key") or "").strip()
        text = item.get("instructions")
        if key in done_keys:
            raise InvalidInput(f"step {key} is done; done steps are never edited", field="steps")
        if key not in plan and key not in declared:
            known = ", ".join([*(k for k in plan if k not in done_keys),
                               *(k for k in declared if k not in plan)]) or "none"
            raise InvalidInput(f"no step {key!r} in this plan or the agent's declared steps; "
                               f"known: {known}", field="steps")
        if key in (k for k, _ in out):
            raise InvalidInput(f"step {key} is listed twice", field="steps")
        if text is not None and (not isinstance(text, str) or len(text) > MAX_INSTRUCTIONS):
            raise InvalidInput(f"instructions of step {key} must be text of at most "
                               f"{MAX_INSTRUCTIONS} characters", field="steps")
        out.append((key, text.strip() if isinstance(text, str) else None))
    return out


def _line(step: dict[str, Any], was: int | None, now: int, old_text: str,
          dropped: list[str]) -> dict[str, Any]:
    text = step.get("instructions", "")
    change = ("added" if was is None else "edited" if text != old_text
              else "moved" if was != now else "kept")
    return {"step": step["key"], "title": step.get("title", step["key"]), "change": change,
            "was": was, "now": now, "instructions": text, "old_instructions": old_text,
            "dropped": dropped}


def _status(state: dict[str, Any], key: str) -> str:
    return state["steps"].get(key, {}).get("status", StepStatus.PENDING)


def edit_refusal(run: Run) -> str:
    """Return why this run's plan cannot be edited now ("" when it can)."""
    if run.status == RunStatus.WAITING and run.wait_kind == WaitKind.CHILDREN:
        return ("the run waits for its child runs, which work on its current step; edit "
                "the plan once they are done, or terminate")
    # The projection's counts (no query: the console asks this for every button it shows).
    if run.steps_total <= run.steps_done:
        return "this run has no plan steps left to edit (none, or all done)"
    return ""


def run_edit_plan(*, run: Run, actor: Any, reason: str,
                  steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Replace the steps not done of a blocked or waiting run, record the new plan, go on."""
    who = actor_name(actor)
    with run_locked(run, rules.EDIT_PLAN, "edit the plan of") as state:
        refusal = edit_refusal(run)
        if refusal:
            raise ActionNotApplicable(refusal, status=run.status)
        if not plan_remaining(state):
            raise ActionNotApplicable("this run has no plan steps left to edit (none, or all "
                                      "done)", status=run.status)
        edit = plan_edit_build(run=run, state=state, steps=steps)
        events: list[NewEvent] = []
        also: list[Callable[[], Any]] = []
        closed: list[str] = []
        for s in plan_remaining(state):
            closed += close_open_calls(run, state, s["key"], events, also,
                                       "not run: a person edited the plan",
                                       cancel_rows=True)
        events += [NewEvent(EventType.STEP_RESET, {"step": k, "by": who, "reason": reason},
                            actor=who) for k in edit.reset]
        version = state["plan_version"] + 1
        events.append(NewEvent(EventType.PLAN_EDITED, {
            "plan_version": version, "steps": edit.steps, "removed": edit.removed,
            "diff": edit.diff, "by": who, "reason": reason[:2000]}, actor=who))
        also.append(lambda: approvals_close_pending(
            run=run, to=ApprovalStatus.STALE, reason="the plan was edited"))
        requeue(run, state, events, reason="plan_edited", actor=who, detail=reason,
                also=also)
    return {"plan_version": version, "diff": edit.diff, "removed": edit.removed,
            "cancelled_calls": closed}
