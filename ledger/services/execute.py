"""Run one attempt of a tool call and classify what happened.

The engine records the ledger row before calling this; this function never touches the
database. Every exception a tool raises becomes an Outcome with a category, whether it may be
retried, and whether the side effect is ambiguous (may have happened).
"""
from __future__ import annotations

import concurrent.futures as cf
import socket
from dataclasses import dataclass, field
from typing import Any

from agentops.control import RunControl
from agentops.memory import Allowance, json_size
from agentops.redaction import EMPTY, Secrets, configured_secrets
from agentops.tools import ToolContext, ToolResult, ToolSpec
from ledger.errors import ToolError, ToolInvalidArguments
from ledger.services.meaning import details_of, meaning_of
from ledger.services.results import InvalidToolOutput, Layered, result_layer

_POOL = cf.ThreadPoolExecutor(max_workers=16, thread_name_prefix="agentops-tool")
# Parallel calls of one turn run here; each may itself wait on _POOL for its timeout, so the
# two pools are separate and neither can starve the other.
_PARALLEL = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="agentops-parallel")


@dataclass
class Outcome:
    """The result of one attempt."""

    status: str  # succeeded | failed | timed_out
    result: Layered | None = None
    category: str = ""
    message: str = ""
    retryable: bool = False
    ambiguous: bool = False
    next_retry_delay: float | None = None
    log: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Return True when the attempt succeeded."""
        return self.status == "succeeded"


def call_secrets_of(spec: ToolSpec, args: dict[str, Any], known: Secrets = EMPTY) -> Secrets:
    """Return the secrets of one call: its sensitive argument values, ``known`` and configured."""
    own = Secrets.of(args[k] for k in spec.sensitive if k in args) if spec.sensitive else EMPTY
    return own | known | configured_secrets()


def toolcall_execute(spec: ToolSpec, ctx: ToolContext, args: dict[str, Any],
                     secrets: Secrets = EMPTY, allowance: Allowance | None = None) -> Outcome:
    """Call the tool once (with its timeout) and return the classified Outcome, scrubbed.

    Nothing the tool returned or raised leaves here with a secret in it: the result (and its
    artifact) and the error message, log and details are scrubbed of the call's sensitive
    argument values, of ``secrets`` (the run's) and of the configured secrets. A result
    bigger than ``allowance`` (the memory its run may still hold) is dropped unread: the
    attempt fails as ``memory_budget``.
    """
    secrets = call_secrets_of(spec, args, secrets)
    try:
        if spec.timeout is None:
            raw = spec.fn(ctx, **args)
        else:
            raw = _with_timeout(spec, ctx, args)
        if allowance is not None:
            held = result_held(raw, stop_at=allowance.bytes)
            if held > allowance.bytes:
                del raw  # nothing keeps it: its memory goes back before the run records why
                return _over_allowance(spec, held, allowance)
        return Outcome("succeeded", result=result_layer(raw, tool=spec.name, secrets=secrets))
    except RunControl:
        raise
    except BaseException as exc:  # noqa: BLE001 - every tool failure is classified, none escapes
        return outcome_scrubbed(classify(spec, exc), secrets)


def result_held(raw: Any, *, stop_at: int | None = None) -> int:
    """Return the bytes a tool's result holds in memory (a streamed log is on disk: 0)."""
    if not isinstance(raw, ToolResult):
        return json_size(raw, stop_at=stop_at)
    size = json_size(raw.facts, stop_at=stop_at) + len(raw.summary or "")
    if isinstance(raw.log, (str, bytes)):
        size += len(raw.log)
    return size


def _over_allowance(spec: ToolSpec, held: int, allowance: Allowance) -> Outcome:
    return Outcome("failed", category="memory_budget",
                   message=f"{spec.name} returned a result of more than {held:,} bytes, past "
                           f"the {allowance.bytes:,} bytes its run may still hold in memory "
                           f"({allowance.why}); the result was dropped, not kept")


def outcome_scrubbed(outcome: Outcome, secrets: Secrets) -> Outcome:
    """Return a failed ``outcome`` with its message, log and details scrubbed of ``secrets``."""
    if secrets:
        outcome.message = secrets.scrub_text(outcome.message)
        outcome.log = secrets.scrub_text(outcome.log)
        outcome.details = secrets.scrub(outcome.details)
    return outcome


def _with_timeout(spec: ToolSpec, ctx: ToolContext, args: dict[str, Any]) -> Any:
    future = _POOL.submit(spec.fn, ctx, **args)
    try:
        return future.result(timeout=spec.timeout)
    except cf.TimeoutError:
        # The thread cannot be killed; tell it to stop and treat the outcome as ambiguous.
        ctx.cancel.cancel()
        raise TimeoutError(f"{spec.name} did not answer within {spec.timeout}s") from None


def classify(spec: ToolSpec, exc: BaseException) -> Outcome:
    """Return the Outcome for an exception raised by a tool."""
    if isinstance(exc, ToolError):
        status = "timed_out" if exc.category == "timeout" else "failed"
        return Outcome(status, category=exc.category, message=exc.model_message,
                       retryable=exc.retryable, ambiguous=exc.ambiguous and spec.is_write,
                       next_retry_delay=exc.next_retry_delay, log=repr(exc), details=exc.details)
    if isinstance(exc, ToolInvalidArguments):
        return Outcome("failed", category="invalid_arguments", message=exc.message)
    if isinstance(exc, InvalidToolOutput):
        return Outcome("failed", category="permanent", message=str(exc), log=repr(exc))
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return Outcome("timed_out", category="timeout",
                       message=f"{spec.name} timed out{_own_words(exc)}",
                       retryable=True, ambiguous=spec.is_write, log=repr(exc))
    if isinstance(exc, ConnectionError):
        return Outcome("failed", category="transient",
                       message=f"{spec.name}: connection failed{_own_words(exc)}",
                       retryable=True, ambiguous=spec.is_write, log=repr(exc))
    if isinstance(exc, TypeError):
        return Outcome("failed", category="invalid_arguments",
                       message=f"{spec.name} rejected its arguments{_own_words(exc)}",
                       log=repr(exc))
    meant = meaning_of(exc)
    if meant is not None:
        category, retryable, said = meant
        return Outcome("failed", category=category,
                       message=f"{spec.name}: {said}{_own_words(exc)}",
                       retryable=retryable, ambiguous=retryable and spec.is_write
                       and category == "transient", log=repr(exc), details=details_of(exc))
    return Outcome("failed", category="tool_error",
                   message=f"{spec.name} failed ({type(exc).__name__}){_own_words(exc)}",
                   log=repr(exc))


_OWN_WORDS_MAX = 300


def _own_words(exc: BaseException) -> str:
    """Return ": <the exception's own text>" (cut to a line's length), or "" when it has none.

    What the tool said is what an operator needs ("timed out after the order was sent");
    the caller scrubs secrets from it like every other message.
    """
    text = " ".join(str(exc).split())
    if not text:
        return ""
    cut = text if len(text) <= _OWN_WORDS_MAX else text[:_OWN_WORDS_MAX - 1] + "…"
    return f": {cut}"


def run_calls(jobs: list[tuple[ToolSpec, ToolContext, dict[str, Any]]],
              secrets: Secrets = EMPTY, allowance: Allowance | None = None) -> list[Outcome]:
    """Run several calls; in parallel when there is more than one. Order follows ``jobs``.

    ``allowance`` is shared: each of several parallel calls may hold an equal part of it.
    """
    if len(jobs) == 1:
        spec, ctx, args = jobs[0]
        return [toolcall_execute(spec, ctx, args, secrets, allowance)]
    part = allowance.split(len(jobs)) if allowance is not None else None
    futures = [_PARALLEL.submit(toolcall_execute, spec, ctx, args, secrets, part)
               for spec, ctx, args in jobs]
    return [f.result() for f in futures]
