"""Restart: a new run of the same task from its input (or an edited one); this run ends."""
from __future__ import annotations

from typing import Any

from ninja import Field

from approvals.actions.base import Action, call_situation, consequence_line
from approvals.actions.params import ActionParams
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from runs.models import Run
from runs.services_operator import restart_refusal, rules, run_restart


class RestartParams(ActionParams):
    """Start again from the original input, or from ``input`` (the whole corrected input)."""

    input: dict[str, Any] | None = Field(
        None, title="Corrected input (optional JSON; empty keeps the original)",
        json_schema_extra={"widget": "json", "initial": "input"})


class Restart(Action):
    """Start the task again as a new run linked to this one; this one ends "restarted as"."""

    name, verb = "run.restart", "restart"
    label = "Restart from input"
    help = ("Start a new run of this task from its input (or a corrected one), linked to this "
            "one; this run ends, cancelled as \"restarted as\" the new one. The new run has "
            "its own keys: what this run already did, it does again.")
    statuses = rules.RESTART
    params = RestartParams
    danger = True
    confirm_word = "restart"  # this run ends, and its effects may be made a second time

    def applies(self, target: Run) -> None:
        """Refuse a child run (its parent waits for it; restart the parent)."""
        super().applies(target)
        refusal = restart_refusal(target)
        if refusal:
            raise ActionNotApplicable(refusal, status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_restart (``input``: the corrected input, if any)."""
        return run_restart(run=target, actor=user, reason=reason, input=params.get("input"))

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List what this run did (or may have done) that the new run does again."""
        calls = ToolCall.objects.filter(run=target).order_by("id")
        return [consequence_line(c, self.verb) for c in calls if call_situation(c) != "open"]


ACTION = Restart()
