"""What stands after a run ended: who ended it, when and why, and what it left in the world.

One selector, ``run_what_stands``, serves the run page's panel and the API's run detail, so
both say the same thing: each write that still stands (tool, key, amount), each one undone by
its compensation, each one nobody confirmed, and each step not done. A cancelled return run
that refunded 60 EUR says so on its panel, above the fold.
"""
from __future__ import annotations

from typing import Any

from agentops.errors import AgentOpsError
from approvals.confirmation import args_amount
from ledger.models import ToolCall
from ledger.statuses import DONE_OK, Effect, ToolCallStatus
from runs.engine.runtime.snapshots import load_state
from runs.models import Run, Step
from runs.models.event import run_events
from runs.statuses import RunStatus, StepStatus

# Ended runs that may leave something behind (a clean success has nothing to report).
ENDED = frozenset({RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.COMPLETED_WITH_EXCEPTIONS})
_DONE_STEPS = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED})
_UNCONFIRMED = frozenset({ToolCallStatus.UNKNOWN, ToolCallStatus.RUNNING})
_CURRENCY_KEYS = ("currency", "ccy")


def run_what_stands(*, run: Run) -> dict[str, Any] | None:
    """Return what stands after ``run`` ended, or None while it is live or a clean success."""
    if run.status not in ENDED:
        return None
    effects = [_effect(c) for c in ToolCall.objects.filter(run=run, effect=Effect.WRITE)
               .order_by("created_at", "id")]
    return {"status": run.status, **_ending(run),
            "standing": [e for e in effects if e["outcome"] == "stands"],
            "compensated": [e for e in effects if e["outcome"] == "compensated"],
            "unconfirmed": [e for e in effects if e["outcome"] == "unconfirmed"],
            "not_done": _not_done(run)}


def _not_done(run: Run) -> list[dict[str, Any]]:
    """Return the plan steps neither done nor skipped, as the run's log folds them."""
    try:
        state = load_state(run)
    except (KeyError, TypeError, AgentOpsError):
        # A log this code cannot fold still shows its steps, as their rows last recorded them.
        return [{"key": s.key, "title": s.title, "status": s.status}
                for s in Step.objects.filter(run=run).order_by("position")
                if s.status not in _DONE_STEPS]
    # The log, not the step rows: after a rollback the rows may still read "succeeded" for
    # a step the run has to do again.
    steps = state.get("steps", {})
    return [{"key": p["key"], "title": p.get("title", ""),
             "status": steps.get(p["key"], {}).get("status", StepStatus.PENDING)}
            for p in state.get("plan", [])
            if steps.get(p["key"], {}).get("status") not in _DONE_STEPS]


def _ending(run: Run) -> dict[str, Any]:
    """Return who ended ``run``, when and why (from the status event that ended it)."""
    event = (run_events(run).filter(type="run.status", data__to=run.status)
             .order_by("-seq").only("actor", "at", "data").first())
    data = event.data if event is not None else {}
    return {"ended_by": (event.actor if event is not None else "") or "system",
            "ended_at": run.finished_at or (event.at if event is not None else None),
            "why": data.get("detail") or data.get("reason") or ""}


def _effect(call: ToolCall) -> dict[str, Any]:
    args = call.approved_args if isinstance(call.approved_args, dict) else call.args
    amount = args_amount(args)
    currency = next((str(args[k]) for k in _CURRENCY_KEYS if isinstance(args, dict)
                     and isinstance(args.get(k), str)), "")
    if call.status in DONE_OK:
        outcome = "stands"
    elif call.status == ToolCallStatus.COMPENSATED:
        outcome = "compensated"
    elif call.status in _UNCONFIRMED:
        outcome = "unconfirmed"
    else:
        outcome = "never_ran"
    return {"tool": call.tool, "tool_call_id": call.tool_call_id, "key": call.idempotency_key,
            "amount": f"{amount} {currency}".strip() if amount else "", "status": call.status,
            "reversibility": call.reversibility, "outcome": outcome, "step": call.step_key}
