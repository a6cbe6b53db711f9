"""Failure classes and the triage table: what a person should do about each, before weighing.

An engine error category (``rate_limited``, ``permission``, ``loop`` ...) maps to one failure
class; each class has one row: the action a careful operator starts from, the alternatives in
order, and the one-line why. ``approvals.recommend.decide`` then weighs the row against the
failing tool's effect, the progress, the writes ahead, the evidence and who is looking.
A new block reason is one new row here (and one line in ``_CATEGORY``).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureClass(StrEnum):
    """Why automation stopped, as an operator needs to know it."""

    INVALID_OUTPUT = "invalid_output"
    LOOP = "loop"
    STALL = "stall"
    TURN_LIMIT = "turn_limit"
    PERMISSION = "permission"
    CREDENTIALS = "credentials"
    BAD_REQUEST = "bad_request"
    API_CHANGED = "api_changed"
    NOT_FOUND = "not_found"
    BUSINESS_REJECTION = "business_rejection"
    PERMANENT = "permanent"
    RATE_LIMIT = "rate_limit"
    OUTAGE = "outage"
    VERSION_GONE = "version_gone"
    BUDGET = "budget"
    RECOVERY_LIMIT = "recovery_limit"
    APPROVAL_EXPIRED = "approval_expired"
    AMBIGUOUS_WRITE = "ambiguous_write"
    DRIFT = "drift"
    CONTEXT_OVERFLOW = "context_overflow"
    MODEL_REFUSED = "model_refused"  # the provider refused the request as malformed
    MODEL_REFUSAL = "model_refusal"  # the model (or its content filter) refused to answer
    MODEL_AUTH = "model_auth"
    SELF_CHECK = "self_check"
    INCOMPLETE_STEP = "incomplete_step"
    CONFIG_ERROR = "config_error"
    INTERNAL_ERROR = "internal_error"
    TIMER_WAIT = "timer_wait"
    ROLLED_BACK = "rolled_back"
    WORLD_CHANGED = "world_changed"
    FAILURE_BUDGET = "failure_budget"  # failed attempts across steps reached the run's budget
    MEMORY_BUDGET = "memory_budget"


# Engine error category (runs.engine.core.policy / ledger.errors) -> failure class.
_CATEGORY = {
    "invalid_output": FailureClass.INVALID_OUTPUT, "invalid_arguments": FailureClass.INVALID_OUTPUT,
    "loop": FailureClass.LOOP, "stall": FailureClass.STALL, "turn_limit": FailureClass.TURN_LIMIT,
    "permission": FailureClass.PERMISSION, "auth_error": FailureClass.MODEL_AUTH,
    "not_found": FailureClass.NOT_FOUND, "credentials": FailureClass.CREDENTIALS,
    "bad_request": FailureClass.BAD_REQUEST, "api_changed": FailureClass.API_CHANGED, "business_rejection": FailureClass.BUSINESS_REJECTION,
    "permanent": FailureClass.PERMANENT, "tool_error": FailureClass.PERMANENT,
    "rate_limited": FailureClass.RATE_LIMIT,
    "timeout": FailureClass.OUTAGE, "server_error": FailureClass.OUTAGE,
    "transient": FailureClass.OUTAGE, "circuit_open": FailureClass.OUTAGE,
    "version_mismatch": FailureClass.VERSION_GONE, "budget": FailureClass.BUDGET,
    "recovery_limit": FailureClass.RECOVERY_LIMIT,
    "approval_expired": FailureClass.APPROVAL_EXPIRED,
    "ambiguous_write": FailureClass.AMBIGUOUS_WRITE, "drift": FailureClass.DRIFT,
    "context_overflow": FailureClass.CONTEXT_OVERFLOW,
    "invalid_request": FailureClass.MODEL_REFUSED,
    "model_refused": FailureClass.MODEL_REFUSAL,
    "self_check_failed": FailureClass.SELF_CHECK, "incomplete_step": FailureClass.INCOMPLETE_STEP,
    "timer": FailureClass.TIMER_WAIT, "rolled_back": FailureClass.ROLLED_BACK,
    "failure_budget": FailureClass.FAILURE_BUDGET,
    "config_error": FailureClass.CONFIG_ERROR, "internal_error": FailureClass.INTERNAL_ERROR,
    "world_changed": FailureClass.WORLD_CHANGED,
    "memory_budget": FailureClass.MEMORY_BUDGET,
}


def failure_class(category: str) -> FailureClass:
    """Return the failure class of an engine error category (unclassified: permanent)."""
    return _CATEGORY.get(category, FailureClass.PERMANENT)


@dataclass(frozen=True)
class Row:
    """The starting point for one failure class."""

    action: str
    alternatives: tuple[str, ...]
    why: str
    deterministic: bool = True  # the same inputs fail the same way again
    retry_means: str = "runs the failed step again"
    retry_can_help: bool = True  # a retry (after a fix, or with fresh guards) may get further


F = FailureClass
TABLE: dict[FailureClass, Row] = {
    F.INVALID_OUTPUT: Row("retry", ("terminate",),
                          "the model kept answering in a form we cannot use (broken tool "
                          "arguments or a cut-off reply); nothing was called",
                          retry_means="asks the model again with a fresh repair budget"),
    F.LOOP: Row("skip", ("retry", "edit_plan", "terminate"),
                "the agent asked for the same call again and again without progress",
                retry_means="asks the model again with fresh loop guards"),
    F.STALL: Row("skip", ("retry", "edit_plan", "terminate"),
                 "several rounds went by without new facts",
                 retry_means="asks the model again with fresh guards"),
    F.TURN_LIMIT: Row("skip", ("retry", "edit_plan", "terminate"),
                      "the step used every model turn its agent allows without finishing",
                      retry_means="gives the step a fresh allowance of model turns"),
    F.PERMISSION: Row("retry", ("terminate", "skip"),
                      "the tool's account lacks permission; the same call is refused until "
                      "someone grants it: grant it, then retry"),
    F.CREDENTIALS: Row("retry", ("terminate", "skip"),
                       "the tool's backend refused our credentials (API key or token); every "
                       "call is refused until someone fixes them: fix the credential, then "
                       "retry"),
    F.NOT_FOUND: Row("terminate", ("restart", "skip", "retry"),
                     "the tool says what it was asked for does not exist, so the run's input "
                     "(or what the model asked for) is likely wrong: terminate, or restart "
                     "from a corrected input, or skip the step if it is optional",
                     retry_can_help=False),
    F.BAD_REQUEST: Row("terminate", ("retry", "skip"),
                       "the tool's backend refused the request as invalid: the arguments, or "
                       "the tool's adapter that builds the request, are wrong; fix the adapter "
                       "and retry, or terminate", retry_can_help=False),
    F.API_CHANGED: Row("retry", ("terminate", "skip"),
                       "the tool's backend answered in a shape its adapter does not read (its "
                       "API may have changed); every call fails the same way until someone "
                       "fixes the adapter: fix it, then retry"),
    F.BUSINESS_REJECTION: Row("skip", ("terminate", "retry"),
                              "the tool refused the request on business grounds; the same "
                              "request gets the same answer", retry_can_help=False),
    F.PERMANENT: Row("skip", ("terminate", "retry"),
                     "the tool failed for good; retrying gives the same answer", retry_can_help=False),
    F.RATE_LIMIT: Row("retry", ("skip", "terminate"),
                      "the backend kept rate-limiting past the retries; limits reset with time",
                      deterministic=False),
    F.OUTAGE: Row("retry", ("skip", "terminate"),
                  "the backend was down or timed out past the retries; outages pass",
                  deterministic=False),
    F.VERSION_GONE: Row("fork_deployed", ("terminate",),
                        "the agent version this run is pinned to is no longer deployed; "
                        "retrying blocks again"),
    F.BUDGET: Row("raise_budget", ("terminate",), "the run used its whole budget"),
    F.RECOVERY_LIMIT: Row("retry", ("terminate",),
                          "workers died on this run too often; check the workers' logs first",
                          deterministic=False, retry_means="resumes from the last checkpoint"),
    F.APPROVAL_EXPIRED: Row("retry", ("terminate", "skip"),
                            "nobody decided the approval in time",
                            retry_means="asks for the approval again"),
    F.AMBIGUOUS_WRITE: Row("confirm_executed", ("confirm_not_executed", "terminate"),
                           "a write may or may not have happened; only a person can tell"),
    F.DRIFT: Row("terminate", ("retry", "skip"), "the next action does not serve the goal"),
    F.CONTEXT_OVERFLOW: Row("skip", ("terminate",),
                            "the step does not fit the model's window even after compaction"),
    F.MODEL_REFUSED: Row("terminate", ("retry", "skip"),
                         "the model provider refused the request as malformed"),
    F.MODEL_REFUSAL: Row("skip", ("terminate", "retry"),
                         "the model refused to do this step (its own refusal or its provider's "
                         "content filter); asking the same context again gets the same "
                         "refusal, so rephrase the step or edit the agent's instructions (a new "
                         "version) before a retry, or skip the step", retry_can_help=False,
                         retry_means="asks the model the same again"),
    F.MODEL_AUTH: Row("retry", ("terminate",),
                      "the model provider refused our credentials; fix them, then retry",
                      retry_means="calls the model again"),
    F.SELF_CHECK: Row("terminate", ("retry",), "the restored state failed its self-check",
                      retry_can_help=False),
    F.INCOMPLETE_STEP: Row("retry", ("finish_partial", "terminate", "skip"),
                           "the step ended without what completes it",
                           retry_means="asks the model again to finish the step"),
    F.ROLLED_BACK: Row("retry", ("terminate", "skip"),
                       "an operator rolled the run back to a checkpoint; it waits there for "
                       "a person", deterministic=False,
                       retry_means="goes on from the checkpoint (writes undone there may be "
                                   "made again, with new keys)"),
    F.CONFIG_ERROR: Row("retry", ("terminate",),
                        "a setting or a registration is wrong (the detail names it); fix the "
                        "configuration and restart the workers, then retry",
                        retry_means="runs the step again with the fixed configuration"),
    F.INTERNAL_ERROR: Row("retry", ("terminate", "skip"),
                          "an unexpected error (in the agent's code, a model client or the "
                          "engine; not a lost worker) stopped the run at its first occurrence; "
                          "read the traceback in the worker log and fix the cause, then retry",
                          deterministic=False),
    F.FAILURE_BUDGET: Row("retry", ("terminate", "skip"),
                          "the run failed again and again across its steps, past its failure "
                          "budget: something its steps share (a backend, the model, the agent's "
                          "code) keeps failing; read the failures in its history and fix the "
                          "cause, then retry", deterministic=False,
                          retry_means="runs the failed step again with a fresh failure allowance"),
    F.MEMORY_BUDGET: Row("skip", ("retry", "terminate"),
                         "a tool result would have taken the run past its share of the "
                         "worker's memory (AGENTOPS_MEMORY_SHARE; the detail gives the sizes); "
                         "the same call returns as much again: skip the step, or give the "
                         "workers more memory (or the run a larger share) and retry",
                         retry_means="calls the tool again under the workers' memory limit"),
    F.TIMER_WAIT: Row("wait", ("wake", "terminate"), "it waits to retry by itself",
                      deterministic=False),
    F.WORLD_CHANGED: Row("retry", ("terminate",),
                         "the world changed while this run waited: the person it runs for lost "
                         "the right to run it, or a resource it uses is at another version than "
                         "it first saw (the panel shows before and now); check that the plan "
                         "still holds, then retry as yourself, or terminate",
                         deterministic=False,
                         retry_means="resumes from the last checkpoint under your name, with "
                                     "the resources as they are now"),
}


@dataclass(frozen=True)
class Recommendation:
    """One recommended action (a verb of approvals.actions, or "wait"), why, alternatives."""

    action: str
    why: str
    alternatives: tuple[str, ...]
