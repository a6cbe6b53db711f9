"""Confirm executed / not executed: a person settles a call whose outcome is ``unknown``."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind, call_preview
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import run_confirm
from runs.statuses import RunStatus


class _Confirm(Action):
    executed = True
    statuses = (RunStatus.UNKNOWN,)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_confirm (``tool_call``, ``facts``, ``evidence`` are optional)."""
        return run_confirm(run=target, actor=user, executed=self.executed, reason=reason,
                           tool_call=params.get("tool_call"), facts=params.get("facts"),
                           evidence=params.get("evidence") or "")

    def _unknown(self, run: Run) -> list[ToolCall]:
        return list(ToolCall.objects.filter(run=run, tool_call_id=run.current_tool_call,
                                            status=TC.UNKNOWN))


class ConfirmExecuted(_Confirm):
    """It happened: record the outcome (facts, evidence) and continue; nothing runs again."""

    name, verb = "run.confirm_executed", "confirm_executed"


class ConfirmNotExecuted(_Confirm):
    """It did not happen: the call is run again with the same idempotency key."""

    name, verb = "run.confirm_not_executed", "confirm_not_executed"
    executed = False

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the unknown call, which runs again."""
        return [call_preview(c, "runs again with the same idempotency key")
                for c in self._unknown(target)]


CONFIRM_EXECUTED = ConfirmExecuted()
CONFIRM_NOT_EXECUTED = ConfirmNotExecuted()
_BY_VERB = {"confirm_executed": CONFIRM_EXECUTED, "confirm_not_executed": CONFIRM_NOT_EXECUTED}


def action_for(*, verb: str, **kwargs: Any) -> Any:
    """Return the confirm action named by ``verb`` bound for the console."""
    return bind(_BY_VERB[verb], **kwargs)
