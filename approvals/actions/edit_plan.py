"""Edit the plan: reorder, remove, add (from the agent's declared steps) or re-instruct the
steps a blocked or waiting run has not done; the run goes on with the new plan version."""
from __future__ import annotations

from typing import Any

from ninja import Field

from agentops.errors import InvalidInput
from approvals.actions.base import Action, consequence_line
from approvals.actions.params import ActionParams, plan_lines
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from ledger.statuses import DONE_OK
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.snapshots import load_state
from runs.models import Run
from runs.services_operator import (
    declared_steps,
    edit_refusal,
    plan_edit_build,
    plan_remaining,
    rules,
    run_edit_plan,
)

_OPEN = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL, TC.CONFIRMED_NOT_EXECUTED)
_HELP = ("One step per line, in the order they should run: the step's key, then optionally "
         "\":\" and the instructions the model reads in that step. Leave a step out to remove "
         "it; add one of the agent's declared steps by its key. Done steps are not listed: "
         "they are never edited.")


class PlanStepIn(ActionParams):
    """One step of the edited plan: a key, and instructions the model reads in that step."""

    key: str = Field(min_length=1, max_length=100)
    instructions: str | None = Field(None, max_length=4000)


class EditPlanParams(ActionParams):
    """The steps still to run, in order (done steps are never edited)."""

    steps: list[PlanStepIn] = Field(default_factory=list, max_length=200,
                                    title="Steps still to run", description=_HELP,
                                    json_schema_extra={"widget": "plan"})


class EditPlan(Action):
    """Replace the steps not done yet; record the new plan version; the run goes on."""

    name, verb = "run.edit_plan", "edit_plan"
    label = "Edit plan"
    help = ("Change the steps this run has not done: reorder, remove, add one of the agent's "
            "declared steps, or change a step's instructions. Done steps stay as they are. "
            "The run then goes on with the new plan; open calls of the edited steps are "
            "cancelled and asked for again.")
    statuses = rules.EDIT_PLAN
    params = EditPlanParams

    def applies(self, target: Run) -> None:
        """Refuse a run waiting for its child runs (they work on its current step)."""
        super().applies(target)
        refusal = edit_refusal(target)
        if refusal:
            raise ActionNotApplicable(refusal, status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_edit_plan."""
        return run_edit_plan(run=target, actor=user, reason=reason, steps=_steps(params))

    def form_initial(self, target: Run) -> dict[str, str]:
        """Return the dialog's text: the remaining steps as they are now, one per line."""
        lines = [s["key"] + (f": {s['instructions']}" if s.get("instructions") else "")
                 for s in plan_remaining(load_state(target))]
        return {"steps": "\n".join(lines)}

    def form_hint(self, target: Run) -> str:
        """Return the declared steps a person may add (not in the plan now)."""
        plan = {s["key"] for s in load_state(target)["plan"]}
        extra = [k for k in declared_steps(target) if k not in plan]
        return f"Declared steps you may add: {', '.join(extra)}" if extra else ""

    def diff(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """Return, per step, what the edit changes (kept, moved, added, removed, edited)."""
        state = load_state(target)
        steps = _steps(params) if params.get("steps") else [
            {"key": s["key"]} for s in plan_remaining(state)]
        return plan_edit_build(run=target, state=state, steps=steps).diff

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the open calls of the steps not done (cancelled) and their writes (stand)."""
        state = load_state(target)
        keys = [s["key"] for s in plan_remaining(state)]
        calls = ToolCall.objects.filter(run=target, step_key__in=keys).order_by("id")
        # The service cancels the steps' open calls (run_edit_plan: close_open_calls).
        return [consequence_line(c, self.verb) for c in calls
                if (c.status in _OPEN and c.tool_call_id in state["open_calls"])
                or (c.status in DONE_OK and c.effect == "write")]


def _steps(params: dict[str, Any]) -> list[dict[str, Any]]:
    steps = params.get("steps") or []
    if isinstance(steps, str):
        return plan_lines(steps)
    if not isinstance(steps, list):
        raise InvalidInput("steps must be a list of {key, instructions}", field="steps")
    return [dict(s) if isinstance(s, dict) else s.model_dump(exclude_unset=True) for s in steps]


ACTION = EditPlan()
