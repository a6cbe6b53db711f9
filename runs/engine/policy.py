"""The failure policy: error class -> automatic action -> what the console recommends.

One table, read by the engine (what to do now) and by the console (what to tell a person
once automation gives up). Errors are classified by their ``category`` field, never by text.
"""
from __future__ import annotations

from dataclasses import dataclass

from runs.statuses import BlockReason


@dataclass(frozen=True)
class Rule:
    """What happens for one error class."""

    auto: str  # backoff | repair | compact | none | probe | stop | pause
    recommend: str  # retry | skip | terminate | confirm | raise_budget | resume
    alternatives: tuple[str, ...]
    block_reason: str
    why: str


_TRANSIENT = Rule("backoff", "retry", ("skip", "terminate"), BlockReason.RETRY_EXHAUSTED,
                  "a temporary failure outlasted its retries; it often passes")
POLICY: dict[str, Rule] = {
    "rate_limited": _TRANSIENT,
    "timeout": _TRANSIENT,
    "server_error": _TRANSIENT,
    "transient": _TRANSIENT,
    "invalid_output": Rule("repair", "retry", ("terminate",), BlockReason.INVALID_OUTPUT,
                           "the model kept answering in a form we cannot use"),
    "context_overflow": Rule("compact", "skip", ("terminate",), BlockReason.PERMANENT_ERROR,
                             "the step does not fit the model's window even after compaction"),
    "permanent": Rule("none", "skip", ("terminate", "retry"), BlockReason.PERMANENT_ERROR,
                      "the tool refused for good; retrying gives the same answer"),
    "permission": Rule("none", "skip", ("terminate", "retry"), BlockReason.PERMANENT_ERROR,
                       "the tool lacks permission; retrying gives the same answer"),
    "invalid_request": Rule("none", "terminate", ("skip", "retry"), BlockReason.PERMANENT_ERROR,
                            "the model provider refused the request as malformed"),
    "auth_error": Rule("none", "retry", ("terminate",), BlockReason.PERMANENT_ERROR,
                       "the model provider refused our credentials; fix them, then retry"),
    "tool_error": Rule("none", "skip", ("terminate", "retry"), BlockReason.PERMANENT_ERROR,
                       "the tool failed in a way it did not classify"),
    "ambiguous_write": Rule("probe", "confirm", ("rollback", "terminate"), "",
                            "a write may have happened; only a person can tell"),
    "loop": Rule("stop", "skip", ("terminate", "retry"), BlockReason.LOOP_DETECTED,
                 "the agent repeats the same call without progress"),
    "turn_limit": Rule("stop", "skip", ("terminate", "retry"), BlockReason.LOOP_DETECTED,
                       "the step used all the model turns its agent allows"),
    "stall": Rule("stop", "skip", ("terminate", "retry"), BlockReason.STALLED,
                  "several rounds went by without progress"),
    "budget": Rule("pause", "raise_budget", ("terminate",), BlockReason.BUDGET_EXHAUSTED,
                   "the run used its budget; raise it to continue"),
    "recovery_limit": Rule("stop", "retry", ("terminate",), BlockReason.RECOVERY_LIMIT,
                           "workers died on this run too often; look, then retry"),
    "circuit_open": Rule("pause", "retry", ("terminate",), BlockReason.CIRCUIT_OPEN,
                         "the tool failed repeatedly across runs; retry once it recovers"),
    "version_mismatch": Rule("stop", "terminate", ("retry",), BlockReason.VERSION_MISMATCH,
                             "the agent version this run is pinned to is not deployed"),
    "drift": Rule("stop", "terminate", ("retry", "skip"), BlockReason.DRIFT,
                  "the next action does not serve the goal"),
    "approval_expired": Rule("stop", "retry", ("terminate", "skip"),
                             BlockReason.APPROVAL_EXPIRED, "nobody decided the approval in time"),
    "incomplete_step": Rule("stop", "retry", ("skip", "terminate"),
                            BlockReason.INCOMPLETE_STEP,
                            "the step ended without what it declares done; retry it, or skip "
                            "it and the run carries that as an exception"),
    "self_check_failed": Rule("stop", "terminate", ("retry",), BlockReason.SELF_CHECK_FAILED,
                              "the restored state failed its self-check"),
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
