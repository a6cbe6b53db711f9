"""``agentops run``: start a run and follow it with a progress bar until it ends or needs a person."""
from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from agentops import clock
from agentops.errors import AgentOpsError, ConfigError
from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.transition import run_transition
from runs.engine.runtime.queue import worker_name
from runs.models import Run, WorkerHeartbeat
from runs.statuses import ATTENTION, TERMINAL, RunStatus
from runs.sweeper import sweep_once

BAR = 24
# How long a run may sit queued before --follow checks whether any worker is there to take it.
QUEUED_HINT_AFTER_S = 2.0


def worker_last_seen_s() -> float | None:
    """Return the age in seconds of the newest worker heartbeat (None: never seen)."""
    seen = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
    return None if seen is None else (clock.now() - seen).total_seconds()


def no_worker_hint() -> str:
    """Return why no worker will take a queued run, or "" when one is alive."""
    age = worker_last_seen_s()
    limit = float(getattr(settings, "AGENTOPS_HEARTBEAT_MAX_AGE_S", 60.0))
    if age is not None and age <= limit:
        return ""
    when = "no worker has ever reported" if age is None else f"the last worker heartbeat is {age:.0f}s old"
    return (f"no worker is alive ({when}), so nothing will pick this run up: start one with "
            "`manage.py agentops worker`, or run it here with `--inline`")


def progress_line(run: Run) -> str:
    """Return one line: a bar of steps done, the status and the current step."""
    total = max(run.steps_total, 1)
    filled = int(BAR * min(run.steps_done, total) / total)
    bar = "#" * filled + "-" * (BAR - filled)
    step = f" · {run.current_step}" if run.current_step else ""
    return (f"[{bar}] {run.steps_done}/{run.steps_total} steps · {run.status}{step} · "
            f"{run.model_calls} model / {run.tool_calls} tool calls")


def panel_text(run: Run) -> str:
    """Return what a person needs to know when the run waits, is blocked or unknown."""
    lines = [f"Run {run.pk} needs a person: {run.status}"]
    if run.status == RunStatus.WAITING:
        until = f" until {run.wait_until:%Y-%m-%d %H:%M:%S}" if run.wait_until else ""
        lines.append(f"  waiting for: {run.wait_kind}{until}")
        for key in ("reason", "name", "tools"):
            if run.wait_data.get(key):
                lines.append(f"  {key}: {run.wait_data[key]}")
    if run.attention_reason:
        lines.append(f"  reason: {run.attention_reason}")
    if run.attention_detail:
        lines.append(f"  detail: {run.attention_detail}")
    if run.recommended_action:
        lines.append(f"  recommended: {run.recommended_action} — {run.recommendation_why}")
    if run.current_tool_call:
        lines.append(f"  tool call: {run.current_tool_call}")
    return "\n".join(lines)


def exceptions_text(run: Run) -> str:
    """Return the exceptions an ended run carries, one per line: what, who, when, why."""
    lines = [f"Run {run.pk} completed with exceptions:"]
    for e in run.exceptions:
        why = f" — {e['why']}" if e.get("why") else ""
        lines.append(f"  - {e['what']} (by {e['who']}, {e.get('when') or 'time unknown'}){why}")
    return "\n".join(lines)


def run_follow(run: Run, *, out: Any, inline: bool = False, timeout_s: float = 600,
               poll_s: float = 0.5, stop_on_wait: bool = False) -> Run:
    """Print progress until ``run`` ends or needs a person; tick it here when ``inline``."""
    deadline = time.monotonic() + timeout_s
    hint_at = time.monotonic() + QUEUED_HINT_AFTER_S
    last = ""
    while time.monotonic() < deadline:
        run.refresh_from_db()
        line = progress_line(run)
        if line != last:
            out.write(line + "\n")
            last = line
        if run.status in TERMINAL:
            return run
        if run.status in ATTENTION and (run.status != RunStatus.WAITING or stop_on_wait
                                        or run.wait_kind == "approval"):
            out.write(panel_text(run) + "\n")
            return run
        if inline:
            try:
                _tick_inline(run, worker_name())
            except AgentOpsError as exc:  # a configuration mistake: every tick would repeat it
                _inline_end(run, exc, out)
            continue
        if run.status == RunStatus.QUEUED and time.monotonic() >= hint_at:
            hint = no_worker_hint()
            if hint:
                out.write(hint + "\n")
            hint_at = deadline  # say it once
        time.sleep(poll_s)
    out.write(f"still {run.status} after {timeout_s:.0f}s; follow it in the console\n")
    return run


def _tick_inline(run: Run, worker: str) -> None:
    if run.status == RunStatus.QUEUED:
        run_tick(run.pk, worker=worker)
    else:
        time.sleep(0.2)
        sweep_once()


def _inline_end(run: Run, exc: AgentOpsError, out: Any) -> None:
    """Say what a tick here raised and block the run with it, never leave it ``running``."""
    detail = f"{type(exc).__name__}: {exc.message}"
    out.write(f"error: {detail}\n")
    run.refresh_from_db()
    if run.status == RunStatus.RUNNING and run.lease_owner == worker_name():
        reason = "config_error" if isinstance(exc, ConfigError) else "internal_error"
        run_transition(run, RunStatus.BLOCKED, reason=reason, detail=detail,
                       expected_version=run.version)
