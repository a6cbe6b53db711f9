"""What a person sees when automation stops: reason, detail, signature and recommendation."""
from __future__ import annotations

import hashlib
from typing import Any

from approvals.recommend import recommend
from runs.engine.policy import rule_for


def attention_fields(*, category: str, detail: str, state: dict[str, Any], agent: str,
                     tool: str = "", tool_call_id: str = "") -> dict[str, Any]:
    """Return the Run columns describing why a run stopped and what to do about it."""
    step = state.get("current_step") or ""
    signature = hashlib.sha256(f"{agent}|{step}|{tool}|{category}".encode()).hexdigest()[:16]
    action, why = recommend(category=category, state=state, tool=tool)
    return {
        "attention_signature": signature,
        "recommended_action": action,
        "recommendation_why": why[:300],
        "current_tool_call": tool_call_id,
        "attention_detail": detail[:2000],
    }


def block_reason(category: str) -> str:
    """Return the blocked reason for an error category."""
    return rule_for(category).block_reason
