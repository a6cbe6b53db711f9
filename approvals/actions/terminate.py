"""Terminate: cancel the run with a reason; nothing new starts."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, consequence_line, standing_writes
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import rules, run_terminate


_NEVER_RUN = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL,
              TC.CONFIRMED_NOT_EXECUTED)


class Terminate(Action):
    """Cancel the run (RunCancelled first; late results are recorded, never turn it green)."""

    name, verb = "run.terminate", "terminate"
    label = "Terminate"
    help = "Cancel the run. Nothing new starts; an in-flight tool is told to stop."
    statuses = rules.LIVE
    bulk = True
    danger = True
    confirm_word = "terminate"
    during_rollback = True  # run_terminate does not wait for a rollback

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_terminate."""
        return run_terminate(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the calls that never run, the unknown ones, and each write that stays done."""
        open_ = ToolCall.objects.filter(run=target, status__in=_NEVER_RUN).order_by("id")
        unknown = ToolCall.objects.filter(run=target, effect="write",
                                          status__in=(TC.UNKNOWN, TC.RUNNING)).order_by("id")
        return ([consequence_line(c, self.verb) for c in [*open_, *unknown]]
                + standing_writes(target, self.verb))


ACTION = Terminate()
