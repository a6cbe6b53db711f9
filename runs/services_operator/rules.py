"""When each operator service applies: its run statuses and the refusals it makes.

The services below lock the run and call these before changing anything; the operator actions
in approvals.actions declare the same status sets and call the same predicates from check(),
so a button the console offers is one the service accepts, and vice versa.
"""
from __future__ import annotations

from collections.abc import Sequence

from runs.engine.runtime.budgets import budget_exhausted
from runs.models import Run
from runs.statuses import TERMINAL, BlockReason, RunStatus

ROLLBACK_OWNER = "rollback:"

RETRY = (RunStatus.BLOCKED,)
SKIP = (RunStatus.BLOCKED,)
RESUME = (RunStatus.BLOCKED,)
CONFIRM = (RunStatus.UNKNOWN,)
ROLLBACK = (RunStatus.BLOCKED, RunStatus.UNKNOWN)
FINISH = (RunStatus.BLOCKED, RunStatus.UNKNOWN, RunStatus.WAITING)  # finish with partial results
EDIT_PLAN = (RunStatus.BLOCKED, RunStatus.WAITING)  # edit the steps not done yet
RESTART = (RunStatus.BLOCKED, RunStatus.UNKNOWN, RunStatus.WAITING)  # a new run from the input
LIVE = tuple(s for s in RunStatus if s not in TERMINAL)  # terminate, raise budget


def status_refusal(run: Run, statuses: Sequence[str], verb: str) -> str:
    """Return why ``verb`` does not apply to a run in its status ("" when it does)."""
    if run.status in statuses:
        return ""
    if run.status in TERMINAL:
        return f"cannot {verb}: the run already ended ({run.status})"
    return f"{verb} applies to runs that are {' or '.join(statuses)}; this one is {run.status}"


def rollback_refusal(run: Run) -> str:
    """Return why nothing but the rollback itself may touch the run now ("" when free)."""
    if run.lease_owner.startswith(ROLLBACK_OWNER):
        return (f"a rollback by {run.lease_owner[len(ROLLBACK_OWNER):]} is in progress on "
                "this run; wait for it")
    return ""


def resume_refusal(run: Run) -> str:
    """Return why a blocked run cannot simply resume ("" when its budget allows it again)."""
    if run.attention_reason != BlockReason.BUDGET_EXHAUSTED:
        return (f"resume continues a run its budget paused; this one is blocked for "
                f"{run.attention_reason or 'another reason'}: retry or skip it instead")
    # The Run columns are the projection of the state's usage (written with every unit).
    usage = {"tokens": run.tokens_used, "model_calls": run.model_calls,
             "tool_calls": run.tool_calls, "cost_micros": run.cost_micros}
    why = budget_exhausted(run, usage)
    return f"the budget is still exhausted ({why}); raise it first" if why else ""
