"""Restart a task from its input: a new run of the same goal, the old one ends "restarted as".

The new run starts from the original input (or an edited one) on the deployed agent version,
with the old run's constraints and limits, linked to it (``Run.restarted_from``). The old run
is cancelled in the same transaction with the reason "restarted as <new run>: ...", so its
approvals go stale and its open calls close as on any cancel. The new run has its own
idempotency keys: every effect the old run made is made again when the new run gets there
(approvals.consequences, action "restart", says so per effect class in the preview).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agentops.agents import registry
from agentops.jsonstate import check_json
from approvals.errors import ActionNotApplicable
from runs.engine.runtime.start import run_start
from runs.errors import UnknownAgent
from runs.models import Run
from runs.services import run_cancel
from runs.services_operator import rules
from runs.services_operator.common import actor_name, run_locked

_LIMITS = {"tokens": "budget_tokens", "model_calls": "budget_model_calls",
           "tool_calls": "budget_tool_calls", "cost_micros": "budget_cost_micros"}


def restart_refusal(run: Run) -> str:
    """Return why this run cannot be restarted ("" when it can)."""
    if run.parent_id is not None:
        return ("this is a child run its parent waits for; restart the parent run, or "
                "terminate this one")
    try:
        registry.get(run.agent_name)
    except UnknownAgent:
        return f"no version of {run.agent_name} is deployed to restart on"
    return ""


def run_restart(*, run: Run, actor: Any, reason: str,
                input: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start a new run of ``run``'s task from its input (or ``input``); cancel ``run``."""
    if input is not None:
        check_json(input, "$input")
    with transaction.atomic(), run_locked(run, rules.RESTART, "restart") as state:
        refusal = restart_refusal(run)
        if refusal:
            raise ActionNotApplicable(refusal, status=run.status)
        edited = input is not None and input != run.input
        new = run_start(agent=run.agent_name, goal=run.goal,
                        input=input if input is not None else run.input,
                        budget={k: getattr(run, c) for k, c in _LIMITS.items()},
                        constraints=list(state["run"].get("constraints", [])), actor=actor,
                        restarted_from=run)
        note = f"restarted as {new.pk}" + (" from an edited input" if edited else "")
        run_cancel(run=run, actor=actor, reason=f"{note}: {reason}"[:500] if reason else note)
    return {"restarted_as": str(new.pk), "edited_input": edited, "by": actor_name(actor),
            "old_version": run.agent_version, "new_version": new.agent_version,
            "old_steps_done": run.steps_done}
