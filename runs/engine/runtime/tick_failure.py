"""A failure that escapes a tick without losing its process becomes a classified step failure.

Only a lost process (killed, paused past its lease, or cut off from the database) is left to
the sweeper's recovery, whose ``recovery_limit`` says "the run lost its worker". Anything else
raised out of a tick — a provider's garbage a client did not map, a codec error, a setting
missing (``ConfigError``), a bug in the agent's code or the engine — would fail the same way
on every worker: it blocks the run at its first occurrence, with the exception's type and
message as the reason's detail and the traceback in the log beside the run, step and
tool_call ids.

The session's state may be ahead of the database (a unit applied but not committed), so the
run is blocked from what was committed: its row read again (still this worker's) and its
state loaded; a run someone else changed meanwhile is left to them.
"""
from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

from django.db import InterfaceError, OperationalError

from agentops.errors import ConfigError
from agentops.observability.logging import run_log_context
from runs.engine.runtime.outcomes import block, block_unopened
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.snapshots import load_state
from runs.errors import IllegalTransition
from agentops.control import LeaseLost
from runs.models import Run
from runs.slots import draining
from runs.statuses import RunStatus

log = logging.getLogger("agentops.engine")

# Losing the database session is losing the worker: nothing can be written, the lease
# expires and the sweeper recovers the run (counted against its recovery limit).
_PROCESS_LOST = (OperationalError, InterfaceError, MemoryError)
_ROOT = Path(__file__).resolve().parents[3]
# What a tick was doing, by the engine function on the stack (innermost first).
_PHASES = (("complete", "the model call"), ("settle", "handling a tool's result"),
           ("record_settled", "recording tool results"), ("commit", "committing a unit"),
           ("model_turn", "a model turn"), ("tool_phase", "the tool phase"),
           ("session_open", "opening the run"))


def failure_category(exc: BaseException) -> str | None:
    """Return the error category of an exception out of a tick; None when the process is lost."""
    if isinstance(exc, _PROCESS_LOST) or not isinstance(exc, Exception) or draining():
        return None
    if isinstance(exc, ConfigError):
        return "config_error"
    return "internal_error"


def tick_failed(run: Run, worker: str, session: RunSession | None, exc: Exception) -> str:
    """Block ``run`` for ``exc`` (raised out of its tick) and return the tick's outcome.

    Raises ``exc`` again when it means the process is lost, or when the run cannot be
    blocked (the database refuses): then the lease expires and the sweeper recovers it.
    """
    category = failure_category(exc)
    if category is None:
        raise exc
    state = session.state if session is not None else {}
    step = state.get("current_step") or None
    calls = [cid for cid, c in state.get("open_calls", {}).items() if c.get("step") == step]
    detail = failure_detail(exc, category)
    with run_log_context(step=step, tool_call_id=",".join(calls) or None):
        # A configuration error's message names the setting: a traceback would bury it.
        log.error("tick failed (%s, %s): %s", category, type(exc).__name__, detail,
                  exc_info=None if category == "config_error" else exc)
    try:
        return _block(run, worker, session, category, detail, calls)
    except (LeaseLost, IllegalTransition):
        return "lease_lost"
    except Exception:
        log.exception("could not block run %s after %s; its lease will expire",
                      run.pk, type(exc).__name__)
        raise exc from None


def failure_detail(exc: BaseException, category: str) -> str:
    """Return what went wrong, for a person: the exception, where it was raised, what it is."""
    message = str(exc).strip() or "(no message)"
    what = (f"configuration error: {message}" if category == "config_error"
            else f"{type(exc).__name__}: {message}")
    where = _where(exc)
    tail = ("fix the configuration, restart the workers, then retry"
            if category == "config_error" else
            "an unexpected error, not a lost worker; the traceback is in the worker log")
    return f"{what} ({where}); {tail}"


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "raised before the tick began"
    last = frames[-1]
    path = Path(last.filename)
    try:
        shown = str(path.resolve().relative_to(_ROOT))
    except ValueError:
        shown = "/".join(path.parts[-2:])
    names = {f.name for f in frames}
    phase = next((words for name, words in _PHASES if name in names), "the tick")
    return f"during {phase}, raised at {shown}:{last.lineno} in {last.name}"


def _block(run: Run, worker: str, session: RunSession | None, category: str, detail: str,
           calls: list[str]) -> str:
    fresh = Run.objects.get(pk=run.pk)
    if fresh.status != RunStatus.RUNNING or fresh.lease_owner != worker:
        return "lease_lost"
    state = load_state(fresh)
    if session is None:
        block_unopened(fresh, category, detail, state=state)
        return RunStatus.BLOCKED
    again = RunSession(run=fresh, state=state, agent=session.agent, worker=worker,
                       tool_limits=session.tool_limits, secrets=session.secrets)
    block(again, category, detail, tool_call_id=calls[0] if len(calls) == 1 else "",
          tool=_tool_of(state, calls))
    return RunStatus.BLOCKED


def _tool_of(state: dict[str, Any], calls: list[str]) -> str:
    """Return the tool of the step's one open call (the recommendation weighs its effect)."""
    if len(calls) != 1:
        return ""
    return str(state.get("open_calls", {}).get(calls[0], {}).get("name", ""))
