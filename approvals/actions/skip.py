"""Skip: mark the blocked step skipped, optionally with operator-provided output facts."""
from __future__ import annotations

from typing import Any

from ninja import Field

from approvals.actions.base import Action, consequence_line, step_calls
from approvals.actions.params import ActionParams
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import rules, run_skip

TC_OPEN = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL, TC.CONFIRMED_NOT_EXECUTED)


class SkipParams(ActionParams):
    """Skip the current step (or ``step``), optionally giving the output it should have had."""

    output: Any = Field(None, title="Output facts for the skipped step (optional JSON)",
                        json_schema_extra={"widget": "json"})
    step: str | None = Field(None, max_length=100, json_schema_extra={"widget": "hidden"})


class Skip(Action):
    """Skip the step and continue with the next one."""

    name, verb = "run.skip", "skip"
    label = "Skip step"
    help = "Mark the current step skipped (optionally with output facts) and continue."
    statuses = rules.SKIP
    params = SkipParams
    bulk = True

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_skip (``output``: facts for later steps; ``step``: which one)."""
        return run_skip(run=target, actor=user, reason=reason, output=params.get("output"),
                        step=params.get("step"))

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the step's calls that will be cancelled instead of run (nothing runs again)."""
        return [consequence_line(c, self.verb) for c in step_calls(target, TC_OPEN)]


ACTION = Skip()
