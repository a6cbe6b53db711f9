"""Fencing: how long an attempt of a side effect may still be in flight, and its proof of lease.

A write's attempt is opened by a fenced commit (runs.engine.runtime.session ``fence=True``: version
and lease owner checked in the statement that marks the attempt started, lease renewed in
full). The worker then dispatches at once, so the call leaves the process before
start + TTL, and the tool's timeout bounds it after that: its **hard deadline** is
start + timeout + lease TTL. Until then a worker that was paused (a GC pause, a frozen VM,
SIGSTOP) may still wake up and make the effect, so a probe's "not found" means "not done"
only after the hard deadline.
"""
from __future__ import annotations

import datetime as dt


from agentops.hot_settings import hot_setting
from agentops.tools import ToolSpec
from ledger.models import ToolAttempt, ToolCall


def tool_timeout(spec: ToolSpec) -> float:
    """Return how long an attempt of ``spec`` may take: its timeout, else the default.

    A write without a declared timeout is not cut off in process (its thread could not be
    stopped anyway); the default is the bound its author promises by honouring
    ``ctx.deadline``.
    """
    if spec.timeout is not None:
        return float(spec.timeout)
    return float(hot_setting("AGENTOPS_TOOL_TIMEOUT_S"))


def hard_deadline(spec: ToolSpec, started: dt.datetime) -> dt.datetime:
    """Return when an attempt started at ``started`` can no longer be in flight."""
    return started + dt.timedelta(seconds=tool_timeout(spec) + hot_setting("AGENTOPS_LEASE_TTL_S"))


def attempt_started(call: ToolCall, attempt: int) -> dt.datetime:
    """Return when attempt ``attempt`` of ``call`` was marked started (its last change if unknown)."""
    started = (ToolAttempt.objects.filter(tool_call_id=call.pk, attempt=attempt)
               .values_list("started_at", flat=True).first())
    return started or call.updated_at
