"""When a batch of reads' unit goes out: held for its reply's, sent before them, or ridden on.

Two savings of a commit, both for plain reads (no effect, safe to run again):

- **held**: a reply whose calls are all plain reads of tools that answered within
  AGENTOPS_READ_RIDE_MS the last time this process ran them writes nothing before they run.
  Its events (the reply, the attempts opened) are applied and deferred, the reads run, and
  the reply, its ledger rows, its attempts (closed, with their outcome) and their results go
  out as ONE unit before the model is asked again: one commit a step whatever the model's
  latency, and while the run waits on its model the database already says what happened
  (results in, ``model.requested``). Like Temporal's local activities: a worker lost while
  they run loses the reply too; the run asks its model again, as for a worker lost during
  the model call, and the reads run again (the lost attempt is in no row). A tool slower
  than that last time is not held on its next batch.
- **riding**: the results of reads whose attempts committed open before they ran ride the
  run's next unit when the model answers within the same bound (``results_ride``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.settlement import Settlement
from agentops.hot_settings import hot_setting

# How long each (agent, version, tool) read last took in this process, in milliseconds: what
# says whether its next batch may be held. Process memory only: a worker that never ran the
# tool sends the reply first, as before.
_last_ms: dict[tuple[str, str, str], int] = {}


def _key(session: RunSession, tool: str) -> tuple[str, str, str]:
    return (session.agent.name, str(session.agent.version), tool)


def reads_held(session: RunSession, calls: Sequence[ToolCall]) -> bool:
    """Return True when the reply asking for ``calls`` (plain reads) may wait for them.

    Every tool answered within AGENTOPS_READ_RIDE_MS last time here, no two calls share a
    key (their events would be keyed: such a unit waits for its commit), and no earlier
    read's result is still riding: a read may look at the ledger (``next_page`` does), and
    the reply's unit, sent first, writes what rides before the read runs.
    """
    limit = hot_setting("AGENTOPS_READ_RIDE_MS")
    if limit <= 0 or not calls or session.riding:
        return False
    keys: set[str] = set()
    for c in calls:  # one pass: a reply asks for one or a few calls
        if (c.effect == "write" or c.idempotency_key in keys
                or _last_ms.get(_key(session, c.tool), limit + 1) > limit):
            return False
        keys.add(c.idempotency_key)
    return True


def reads_timed(session: RunSession, settled: Sequence[Settlement]) -> None:
    """Remember how long each settled read took (whether its tool's next batch is held)."""
    for st in settled:
        if st.call.effect != "write" and st.attempt is not None \
                and st.attempt.duration_ms is not None:
            _last_ms[_key(session, st.call.tool)] = st.attempt.duration_ms


def attempt_held(call: ToolCall) -> ToolAttempt | None:
    """Return the attempt row a held unit will insert for ``call`` (None: not held)."""
    return getattr(call, "held_attempt", None)


def results_ride(session: RunSession, settled: list[Settlement]) -> bool:
    """Return True when the results of quick reads may ride the run's next unit.

    That unit comes soon (the run's model replied within AGENTOPS_READ_RIDE_MS) and carries
    them in its own commit: one commit a step. Their attempts were committed open before
    they ran, so a crash before that unit runs each read again as its next attempt (a read
    is safe to repeat, and the time lost is bounded by the same setting). Nothing rides a
    unit already held back (a held reply goes out before its model is asked again). A
    write's result is never held back: its effect happened, and only its outcome says so.
    """
    limit = hot_setting("AGENTOPS_READ_RIDE_MS")
    model_ms = session.reply_marks.get("ms")
    return (limit > 0 and model_ms is not None and model_ms <= limit and not session.deferred
            and all(_rides_one(st, limit) for st in settled))


def _rides_one(st: Settlement, limit: int) -> bool:
    return (st.next == "continue" and st.call.effect != "write" and st.attempt is not None
            and st.attempt.duration_ms <= limit and attempt_held(st.call) is None)


def held_calls(settled: Sequence[Any]) -> bool:
    """Return True when any of ``settled`` was held (its rows were never written)."""
    return any(attempt_held(st.call) is not None for st in settled)
