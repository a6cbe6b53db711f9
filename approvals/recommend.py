"""The recommendation a person sees: the policy table, weighed by risk and remaining work."""
from __future__ import annotations

from typing import Any

from runs.engine.policy import rule_for


def progress_ratio(state: dict[str, Any]) -> float:
    """Return the share of plan steps done (succeeded or skipped)."""
    steps = state.get("steps") or {}
    if not steps:
        return 0.0
    done = sum(1 for s in steps.values() if s.get("status") in ("succeeded", "skipped"))
    return done / len(steps)


def recommend(*, category: str, state: dict[str, Any], tool: str = "") -> tuple[str, str]:
    """Return (action, one-line why) for a run stopped by ``category``."""
    rule = rule_for(category)
    action, why = rule.recommend, rule.why
    ratio = progress_ratio(state)
    if action == "terminate" and ratio >= 0.5 and "retry" in rule.alternatives:
        return "retry", f"{why}; most of the work is done ({ratio:.0%}), so resume rather than restart"
    if action == "skip" and ratio < 0.2 and "terminate" in rule.alternatives and category in (
        "loop", "stall"
    ):
        return "terminate", f"{why}; little is done yet ({ratio:.0%}), restarting is cheap"
    return action, why
