"""The failure policy: error class -> automatic action -> the reason a run blocks with.

The engine reads it (what to do now); what a person is told once automation gives up is the
triage table in approvals.recommend. Errors are classified by their ``category`` field,
never by text.
"""
from __future__ import annotations

from dataclasses import dataclass

from runs.statuses import BlockReason


@dataclass(frozen=True)
class Rule:
    """What the engine does for one error class, and the reason a run blocks with."""

    auto: str  # backoff | repair | compact | none | probe | stop | pause
    block_reason: str


_TRANSIENT = Rule("backoff", BlockReason.RETRY_EXHAUSTED)
_PERMANENT = Rule("none", BlockReason.PERMANENT_ERROR)
# What a person is told once automation gives up is approvals.recommend (the triage table),
# which weighs this class against effect, progress, writes ahead, evidence and role.
POLICY: dict[str, Rule] = {
    "rate_limited": _TRANSIENT,
    "timeout": _TRANSIENT,
    "server_error": _TRANSIENT,
    "transient": _TRANSIENT,
    "invalid_output": Rule("repair", BlockReason.INVALID_OUTPUT),
    "context_overflow": Rule("compact", BlockReason.PERMANENT_ERROR),
    "permanent": _PERMANENT,
    "permission": _PERMANENT,
    "not_found": _PERMANENT,
    "business_rejection": _PERMANENT,
    "credentials": _PERMANENT,
    "bad_request": _PERMANENT,
    "api_changed": _PERMANENT,
    "invalid_request": _PERMANENT,
    "auth_error": _PERMANENT,
    "tool_error": _PERMANENT,
    "ambiguous_write": Rule("probe", ""),
    "loop": Rule("stop", BlockReason.LOOP_DETECTED),
    "turn_limit": Rule("stop", BlockReason.LOOP_DETECTED),
    "stall": Rule("stop", BlockReason.STALLED),
    "budget": Rule("pause", BlockReason.BUDGET_EXHAUSTED),
    "memory_budget": Rule("stop", BlockReason.MEMORY_BUDGET),
    "recovery_limit": Rule("stop", BlockReason.RECOVERY_LIMIT),
    "circuit_open": Rule("pause", BlockReason.CIRCUIT_OPEN),
    "version_mismatch": Rule("stop", BlockReason.VERSION_MISMATCH),
    "drift": Rule("stop", BlockReason.DRIFT),
    "approval_expired": Rule("stop", BlockReason.APPROVAL_EXPIRED),
    "incomplete_step": Rule("stop", BlockReason.INCOMPLETE_STEP),
    "model_refused": Rule("stop", BlockReason.MODEL_REFUSED),
    "self_check_failed": Rule("stop", BlockReason.SELF_CHECK_FAILED),
    "world_changed": Rule("stop", BlockReason.WORLD_CHANGED),
    # Failed attempts across the run's steps reached its failure budget (runtime/budgets.py).
    "failure_budget": Rule("stop", BlockReason.FAILURE_BUDGET),
    # Raised out of a tick (runs.engine.runtime.tick_failure): the same tick would fail the
    # same way, so the run stops at the first occurrence instead of burning recoveries.
    "config_error": Rule("stop", BlockReason.CONFIG_ERROR),
    "internal_error": Rule("stop", BlockReason.INTERNAL_ERROR),
}


def rule_for(category: str) -> Rule:
    """Return the rule for an error category (unclassified errors are permanent)."""
    return POLICY.get(category, POLICY["tool_error"])



def backoff_delay(attempt: int, *, base: float, cap: float, retry_after: float | None,
                  jitter: float) -> float:
    """Return the delay before retry ``attempt`` (1-based): exponential, jittered, >= Retry-After.

    ``jitter`` is a draw in [0, 1) from the engine's random source.
    """
    delay = min(cap, base * (2 ** (attempt - 1))) * (0.5 + jitter / 2)
    return max(delay, retry_after or 0.0)
