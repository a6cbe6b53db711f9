"""The recommendation a person sees: the policy table, weighed by side-effect risk and progress.

Start from the failure policy's recommendation for the error class, then adjust:
- progress: when most of the plan is done, resume (retry) rather than restart (terminate);
  when almost nothing is done, a looping or stalled run is cheaper to restart than to skip;
- side-effect risk: reversible writes already made make rollback the first alternative to
  terminating (undo them first); a step whose retry re-runs an irreversible write says so.
Attention runs with the same failure signature (agent, step, tool, error class) are grouped so
one decision can be applied to all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.engine.policy import rule_for

# The policy table says "confirm": a person checks the world and presses one of the two
# confirm buttons, so both are the alternatives (a timed-out write usually happened).
_CONFIRM = ("confirm_executed", "confirm_not_executed")
MOST_DONE = 0.5
LITTLE_DONE = 0.2


@dataclass(frozen=True)
class Recommendation:
    """One recommended action with a one-line why, and the alternatives in order."""

    action: str
    why: str
    alternatives: tuple[str, ...]


def progress_ratio(state: dict[str, Any]) -> float:
    """Return the share of plan steps done (succeeded or skipped)."""
    steps = state.get("steps") or {}
    if not steps:
        return 0.0
    done = sum(1 for s in steps.values() if s.get("status") in ("succeeded", "skipped"))
    return done / len(steps)


def recommendation(*, category: str, state: dict[str, Any], tool: str = "",
                   effect: str = "") -> Recommendation:
    """Return what to do about a run stopped by ``category`` (``effect``: the tool's class)."""
    rule = rule_for(category)
    action, alternatives = rule.recommend, list(rule.alternatives)
    if action == "confirm":
        alternatives = [*_CONFIRM, *alternatives]
    why, ratio = rule.why, progress_ratio(state)
    if action == "terminate" and ratio >= MOST_DONE and "retry" in alternatives:
        action, alternatives = "retry", _swap(alternatives, "retry", "terminate")
        why = f"{why}; most of the work is done ({ratio:.0%}), so resume rather than restart"
    elif action == "skip" and ratio < LITTLE_DONE and category in ("loop", "stall"):
        action, alternatives = "terminate", _swap(alternatives, "terminate", "skip")
        why = f"{why}; little is done yet ({ratio:.0%}), restarting is cheap"
    effect = effect or _effect_of(state, tool)
    if action == "retry" and effect in ("irreversible", "manual"):
        why = f"{why}; the retry runs {tool} ({effect}) again, which did not take effect"
    if "terminate" in (action, *alternatives) and _reversible_writes(state):
        alternatives = ["rollback", *[a for a in alternatives if a != "rollback"]]
        if action == "terminate":
            why = f"{why}; roll back the reversible changes first if they should not stay"
    return Recommendation(action, why, tuple(alternatives))


def recommend(*, category: str, state: dict[str, Any], tool: str = "") -> tuple[str, str]:
    """Return (action, one-line why) for a run stopped by ``category``."""
    r = recommendation(category=category, state=state, tool=tool)
    return r.action, r.why


def _swap(alternatives: list[str], taken: str, given_up: str) -> list[str]:
    rest = [a for a in alternatives if a not in (taken, given_up)]
    return [given_up, *rest]


def _specs(state: dict[str, Any]) -> dict[str, Any]:
    from agentops.agents import registry
    from runs.errors import UnknownAgent

    run = state.get("run") or {}
    try:
        agent = registry.get(run.get("agent", ""), run.get("version"))
    except UnknownAgent:
        return {}
    return {t.name: t for t in agent.tools}


def _effect_of(state: dict[str, Any], tool: str) -> str:
    spec = _specs(state).get(tool) if tool else None
    return spec.effect_class if spec is not None else ""


def _reversible_writes(state: dict[str, Any]) -> int:
    """Count writes made so far that a rollback could undo."""
    specs = _specs(state)
    n = 0
    for turn in state.get("turns") or []:
        for call in turn["calls"]:
            spec = specs.get(call["name"])
            ok = (call.get("result") or {}).get("status") in ("succeeded", "confirmed_executed")
            if ok and spec is not None and spec.is_write and spec.compensate is not None:
                n += 1
    return n

