"""Finish with partial results: end a stopped run on purpose; it carries its exceptions."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, call_preview
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import rules, run_finish_partial

_NEVER_RUN = (TC.PENDING, TC.AWAITING_APPROVAL, TC.FAILED, TC.TIMED_OUT,
              TC.CONFIRMED_NOT_EXECUTED)


class FinishPartial(Action):
    """End the run as "completed with exceptions" with what it has done so far."""

    name, verb = "run.finish_partial", "finish_partial"
    label = "Finish with partial results"
    help = ("End the run now with what it has done. It ends \"completed with exceptions\" "
            "listing what was not done; calls that never ran are cancelled and child runs "
            "are cancelled.")
    statuses = rules.FINISH
    confirm_word = "finish"  # the run ends for good

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_finish_partial."""
        return run_finish_partial(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the calls that will never run (cancelled) and those left unconfirmed."""
        rows = [call_preview(c, "cancelled, never runs") for c in
                ToolCall.objects.filter(run=target, status__in=_NEVER_RUN).order_by("id")]
        rows += [call_preview(c, "stays unconfirmed: listed as an exception") for c in
                 ToolCall.objects.filter(run=target, status=TC.UNKNOWN).order_by("id")]
        return rows


ACTION = FinishPartial()
