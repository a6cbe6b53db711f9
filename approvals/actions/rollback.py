"""Rollback: compensate reversible effects since a checkpoint, tick the rest, restore; then
hold (wait for a person there), terminate, or resume."""
from __future__ import annotations

from typing import Any, Literal

from ninja import Field

from approvals.actions.base import Action, consequence_line
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from ledger.statuses import DONE_OK
from approvals.actions.params import ActionParams
from approvals.confirmation import args_amount
from runs.models import Run
from runs.rollback_points import rollback_points
from runs.services_operator import rollback_plan, rules, run_rollback

_THEN_HELP = ("hold: the run waits for a person at the restored checkpoint (nothing runs "
              "again until someone retries it); terminate: undo, then end the run; resume: "
              "undo, then go on from the checkpoint at once (its writes may be made again)")


class RollbackParams(ActionParams):
    """Undo the effects since event ``to_seq``; ``ticked`` are the calls handled by hand."""

    to_seq: int | None = Field(None, ge=1, le=2**62, title="Roll back to",
                               json_schema_extra={"widget": "checkpoint"})
    ticked: list[str] = Field(default_factory=list, max_length=500,
                              title="I handled it by hand",
                              json_schema_extra={"widget": "ticks"})
    then: Literal["hold", "terminate", "resume"] = Field(
        "hold", title="Then", description=_THEN_HELP,
        json_schema_extra={"widget": "choice", "choices": ["hold", "terminate", "resume"]})


class RollbackTerminateParams(ActionParams):
    """Undo the effects since event ``to_seq`` and end the run."""

    to_seq: int | None = RollbackParams.model_fields["to_seq"]
    ticked: list[str] = RollbackParams.model_fields["ticked"]


class Rollback(Action):
    """Undo what can be undone since ``to_seq``, restore the run to that checkpoint, then
    hold it there for a person (default), end it, or let it go on."""

    name, verb = "run.rollback", "rollback"
    label = "Roll back"
    help = ("Compensate reversible side effects since the chosen checkpoint, list the "
            "irreversible ones for you to handle, restore to that checkpoint, then hold the "
            "run there for a person (or terminate it, or let it go on).")
    statuses = rules.ROLLBACK
    params = RollbackParams
    confirm_word = "rollback"  # compensations call the outside world; they are not undone
    atomic = False  # compensations call the outside world; each is committed on its own

    def then(self, params: dict[str, Any]) -> str:
        """Return what happens once the run is restored: hold, terminate or resume."""
        return params.get("then") or "hold"

    def default_to_seq(self, run: Run, points: list[Any]) -> int | None:
        """Return the checkpoint the dialog starts from: just before the current step."""
        return points[0].seq if points else None

    def to_seq(self, target: Run, params: dict[str, Any]) -> int | None:
        """Return the checkpoint asked for (None: the service's, before the current step)."""
        return params.get("to_seq")

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_rollback (``to_seq``: the checkpoint; ``ticked``: handled call ids)."""
        return run_rollback(run=target, actor=user, reason=reason,
                            to_seq=self.to_seq(target, params),
                            ticked=params.get("ticked") or (), then=self.then(params))

    def confirm_amount(self, target: Run, **params: Any) -> str:
        """Return the amount of the one money-moving effect it undoes or lists, if one."""
        plan = rollback_plan(run=target, to_seq=self.to_seq(target, params))
        calls = [*plan.compensate, *(c for c, _ in plan.checklist)]
        amounts = [a for a in (args_amount(c.approved_args or c.args) for c in calls) if a]
        return amounts[0] if len(amounts) == 1 else ""

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List each effect since the checkpoint: compensated, to tick, or cancelled."""
        plan = rollback_plan(run=target, to_seq=self.to_seq(target, params))
        then = self.then(params)
        rows = [consequence_line(c, self.verb, then=then) for c in plan.compensate]
        rows += [{**consequence_line(c, self.verb, then=then), "why": why}
                 for c, why in plan.checklist]
        rows += [consequence_line(c, self.verb, then=then, situation="open")
                 for c in plan.cancel]
        return rows


class RollbackTerminate(Rollback):
    """Undo what can be undone since ``to_seq`` and end the run: one audited action."""

    name, verb = "run.rollback_terminate", "rollback_terminate"
    label = "Roll back and terminate"
    help = ("Compensate the reversible side effects since the chosen checkpoint, list the "
            "ones nothing can undo (they stay done), then end the run. One action: nothing "
            "is issued again.")
    params = RollbackTerminateParams
    danger = True

    def then(self, params: dict[str, Any]) -> str:
        """Return "terminate": this action always ends the run."""
        return "terminate"

    def to_seq(self, target: Run, params: dict[str, Any]) -> int | None:
        """Return the checkpoint asked for, else the one before the first undoable write."""
        if params.get("to_seq") is not None:
            return params["to_seq"]
        return self.default_to_seq(target, rollback_points(run=target))

    def default_to_seq(self, run: Run, points: list[Any]) -> int | None:
        """Return the checkpoint before the step of the first write a rollback can undo."""
        first = _undoable(run).order_by("id").first()
        before = [p.seq for p in points if first is not None and p.step == first.step_key]
        return min(before) if before else super().default_to_seq(run, points)

    def applies(self, target: Run) -> None:
        """Refuse a run with nothing to undo: Terminate alone does the same, honestly named."""
        super().applies(target)
        run = self.run_of(target)
        # A run that is not stored (a what-if of the recommendation's checks) has no ledger
        # to read: the situation it stands for says whether a write can be undone.
        if not run._state.adding and not _undoable(run).exists():
            raise ActionNotApplicable("nothing this run wrote can be undone (no write with a "
                                      "compensation stands), so there is nothing to roll back: "
                                      "terminate it instead", status=target.status)


def _undoable(run: Run) -> Any:
    """Return the run's writes that stand and that a compensation can undo."""
    return ToolCall.objects.filter(run=run, effect="write", status__in=list(DONE_OK),
                                   reversibility="reversible")


ACTION = Rollback()
TERMINATE = RollbackTerminate()
