"""Confirm executed / not executed: a person settles a call whose outcome is ``unknown``."""
from __future__ import annotations

from typing import Any

from ninja import Field

from approvals.actions.base import Action, consequence_line, may_repeat
from approvals.actions.params import ActionParams
from approvals.confirmation import Typed
from approvals.consequences import doing
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import rules, run_confirm

_CALL = Field(None, max_length=40, description="the unknown call (default: the run's current)",
              json_schema_extra={"widget": "hidden"})


class ConfirmNotExecutedParams(ActionParams):
    """Which unknown call did not happen, and what shows it."""

    tool_call: str | None = _CALL
    evidence: str = Field("", max_length=5000, title="Evidence (what shows it did not happen)",
                          json_schema_extra={"widget": "text"})


class ConfirmExecutedParams(ConfirmNotExecutedParams):
    """Which unknown call happened, with the facts and evidence a person found."""

    evidence: str = Field("", max_length=5000, title="Evidence (what shows it happened)",
                          json_schema_extra={"widget": "text"})
    facts: dict[str, Any] | None = Field(None, title="Facts it produced (optional JSON)",
                                         json_schema_extra={"widget": "json"})


class _Confirm(Action):
    executed = True
    statuses = rules.CONFIRM

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
    label = "It executed"
    help = ("Record that the tool call did happen (add evidence); the run continues with "
            "that outcome.")
    params = ConfirmExecutedParams


class ConfirmNotExecuted(_Confirm):
    """It did not happen: the call runs again (deduplicated only when the tool has a key)."""

    name, verb = "run.confirm_not_executed", "confirm_not_executed"
    label = "It did not execute"
    help = ("Record that the tool call did not happen; it runs again. The table says whether "
            "the tool can tell a repeat (an idempotency key) or may do it a second time.")
    params = ConfirmNotExecutedParams
    executed = False
    bulk = True
    confirm_word = "again"  # typed only when the call may happen a second time (confirmation)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the unknown call, which runs again, and what that may do to the world."""
        return [consequence_line(c, self.verb) for c in self._unknown(target)]

    def confirmation(self, target: Any, **params: Any) -> Typed | None:
        """Ask for the typed word when the call may happen twice (no key, no probe asked).

        ``target`` None (many runs at once): the word is asked, as any run may need it.
        """
        if target is None:
            return Typed(self.confirm_word, subject=self.label, doing="run it again",
                         risk="may do a write a second time")
        risky = may_repeat(self.preview(target, **params))
        if not risky:
            return None
        tool = risky[0]["tool"]
        return Typed(self.confirm_word, subject=tool, doing="run it again",
                     risk=f"has no idempotency key: if it did happen, running it again may "
                          f"{doing(tool)} a second time")


CONFIRM_EXECUTED = ConfirmExecuted()
CONFIRM_NOT_EXECUTED = ConfirmNotExecuted()
