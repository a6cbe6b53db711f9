"""Rollback: compensate reversible effects since a checkpoint, tick the rest, restore."""
from __future__ import annotations

from typing import Any

from ninja import Field

from approvals.actions.base import Action, call_preview
from approvals.actions.params import ActionParams
from approvals.confirmation import args_amount
from runs.models import Run
from runs.services_operator import rollback_plan, rules, run_rollback


class RollbackParams(ActionParams):
    """Undo the effects since event ``to_seq``; ``ticked`` are the calls handled by hand."""

    to_seq: int | None = Field(None, ge=1, le=2**62, title="Roll back to",
                               json_schema_extra={"widget": "checkpoint"})
    ticked: list[str] = Field(default_factory=list, max_length=500,
                              title="I handled it by hand",
                              json_schema_extra={"widget": "ticks"})


class Rollback(Action):
    """Undo what can be undone since ``to_seq`` and restore the run to that checkpoint."""

    name, verb = "run.rollback", "rollback"
    label = "Roll back"
    help = ("Compensate reversible side effects since the chosen checkpoint, list the "
            "irreversible ones for you to handle, then restore to that checkpoint.")
    statuses = rules.ROLLBACK
    params = RollbackParams
    confirm_word = "rollback"  # compensations call the outside world; they are not undone
    atomic = False  # compensations call the outside world; each is committed on its own

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_rollback (``to_seq``: the checkpoint; ``ticked``: handled call ids)."""
        return run_rollback(run=target, actor=user, reason=reason, to_seq=params.get("to_seq"),
                            ticked=params.get("ticked") or ())

    def confirm_amount(self, target: Run, **params: Any) -> str:
        """Return the amount of the one money-moving effect it undoes or lists, if one."""
        plan = rollback_plan(run=target, to_seq=params.get("to_seq"))
        calls = [*plan.compensate, *(c for c, _ in plan.checklist)]
        amounts = [a for a in (args_amount(c.approved_args or c.args) for c in calls) if a]
        return amounts[0] if len(amounts) == 1 else ""

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List each effect since the checkpoint: compensated, to tick, or cancelled."""
        plan = rollback_plan(run=target, to_seq=params.get("to_seq"))
        rows = [call_preview(c, "compensated (undone)") for c in plan.compensate]
        rows += [{**call_preview(c, "tick: handle it by hand"), "why": why}
                 for c, why in plan.checklist]
        rows += [call_preview(c, "cancelled, never runs") for c in plan.cancel]
        return rows


ACTION = Rollback()
