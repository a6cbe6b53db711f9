"""Retry: restart the blocked step from its last clean checkpoint with a fresh retry budget."""
from __future__ import annotations

from typing import Any

from agentops.agents import registry
from approvals.actions.base import Action, call_preview, consequence_line, step_calls
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import rules, run_retry
from runs.statuses import BlockReason


class Retry(Action):
    """Reset the step (fresh retries, guards) and run the call that failed again."""

    name, verb = "run.retry", "retry"
    label = "Retry step"
    help = ("Resume from the last clean checkpoint before the failed step, with a fresh "
            "retry budget for that step.")
    statuses = rules.RETRY
    bulk = True

    def applies(self, target: Run) -> None:
        """Refuse a run whose pinned agent version is gone: a retry would block again."""
        super().applies(target)
        if (target.attention_reason == BlockReason.VERSION_MISMATCH
                and not registry.has(target.agent_name, target.agent_version)):
            raise ActionNotApplicable(f"{target.agent_name}@{target.agent_version} is not "
                                      "deployed, so a retry would block again; continue on the "
                                      "deployed version or terminate", status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_retry."""
        return run_retry(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the failed call that runs again and the step's pending calls."""
        calls = step_calls(target)
        failed = ToolCall.objects.filter(run=target, tool_call_id=target.current_tool_call,
                                         status__in=(TC.FAILED, TC.TIMED_OUT)).first()
        if failed is not None and failed not in calls:
            calls.insert(0, failed)
        rows = [consequence_line(c, self.verb) for c in calls]
        rows += [call_preview(c, "asks for approval again")
                 for c in step_calls(target, (TC.AWAITING_APPROVAL,))]
        rows += [consequence_line(c, self.verb) for c in step_calls(target, (TC.COMPENSATED,))]
        return rows


ACTION = Retry()
