"""What a person sees when automation stops: reason, detail, signature and recommendation."""
from __future__ import annotations

import hashlib
from typing import Any

from approvals.recommend import FailureClass, Situation, decide, recommend_run
from runs.engine.core.policy import rule_for
from runs.statuses import RunStatus


def attention_fields(*, run: Any, category: str, detail: str, state: dict[str, Any],
                     tool: str = "", tool_call_id: str = "",
                     status: str = RunStatus.BLOCKED,
                     evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the Run columns describing why a run stopped and what to do about it.

    ``state`` is the run's real state (progress, writes ahead); ``status`` the one it moves to.
    """
    step = state.get("current_step") or ""
    signature = hashlib.sha256(
        f"{run.agent_name}|{step}|{tool}|{category}".encode()).hexdigest()[:16]
    rec = recommend_run(run=run, state=state, category=category, tool=tool,
                        tool_call_id=tool_call_id, status=status, hint=evidence)
    return {
        "attention_signature": signature,
        "recommended_action": rec.action,
        "recommendation_why": rec.why[:500],
        "recommended_alternatives": list(rec.alternatives),
        "current_tool_call": tool_call_id,
        "attention_detail": detail[:2000],
    }


def wait_fields(*, kind: str, until: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Return the recommendation columns of a durable wait (timers say why and until when)."""
    if kind != "timer":
        return {}

    rec = decide(Situation(FailureClass.TIMER_WAIT, status=RunStatus.WAITING, wait_until=until,
                           wait_reason=str(data.get("reason", ""))))
    return {"recommended_action": rec.action, "recommendation_why": rec.why[:500],
            "recommended_alternatives": list(rec.alternatives),
            "attention_detail": f"waiting: {data.get('reason', 'a timer')}"[:2000]}


def block_reason(category: str) -> str:
    """Return the blocked reason for an error category."""
    return rule_for(category).block_reason
