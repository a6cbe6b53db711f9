"""Rollback: compensate reversible effects since a checkpoint, tick the rest, restore."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind, call_preview
from runs.models import Run
from runs.services_operator import rollback_plan, run_rollback
from runs.services_operator.rollback import ROLLBACK_STATUSES


class Rollback(Action):
    """Undo what can be undone since ``to_seq`` and restore the run to that checkpoint."""

    name, verb = "run.rollback", "rollback"
    statuses = ROLLBACK_STATUSES
    atomic = False  # compensations call the outside world; each is committed on its own

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_rollback (``to_seq``: the checkpoint; ``ticked``: handled call ids)."""
        return run_rollback(run=target, actor=user, reason=reason, to_seq=params.get("to_seq"),
                            ticked=params.get("ticked") or ())

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List each effect since the checkpoint: compensated, to tick, or cancelled."""
        plan = rollback_plan(run=target, to_seq=params.get("to_seq"))
        rows = [call_preview(c, "compensated (undone)") for c in plan.compensate]
        rows += [{**call_preview(c, "tick: handle it by hand"), "why": why}
                 for c, why in plan.checklist]
        rows += [call_preview(c, "cancelled, never runs") for c in plan.cancel]
        return rows


ACTION = Rollback()


def action_for(**kwargs: Any) -> Any:
    """Return the action bound for the console."""
    return bind(ACTION, **kwargs)
