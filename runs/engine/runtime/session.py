"""RunSession: a worker's hold on one run — its state in memory and the way units commit.

A unit's events are applied to the in-memory state first, then committed in one transaction
with the ledger rows, the Run projection, the lease renewal and (at milestones) a snapshot.
If the commit fails the worker has lost the run and drops the session, so the state is never
used ahead of the database.
"""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


from agentops.hot_settings import hot_setting
from agentops import clock
from agentops.agents import Agent
from agentops.redaction import EMPTY, Secrets
from agentops.writes import RowsInsert
from agentops.llm.protocol import ModelClient
from runs.engine.core import reducer
from runs.engine.runtime import telemetry
from runs.engine.runtime.events import NewEvent, event_append, events_scrubbed, fields_scrubbed
from runs.engine.runtime.snapshots import snapshot_with_text
from runs.engine.runtime.steps import step_rows_writers, step_statuses
from runs.engine.runtime.transition import run_transition
from runs.engine.runtime.unit_sql import unit_after_commit
from runs.models import Run, Snapshot
from runs.statuses import RunStatus, StepStatus

SNAPSHOT_MIN_BYTES = 16_384
_REST_TAIL_BYTES = 1_024  # events a resting run may have after its last snapshot
_ENDED = {RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_EXCEPTIONS, RunStatus.FAILED,
          RunStatus.CANCELLED}
_REST = {RunStatus.WAITING, RunStatus.BLOCKED, RunStatus.UNKNOWN,
         RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_EXCEPTIONS, RunStatus.FAILED,
         RunStatus.CANCELLED}


def state_projection(s: dict[str, Any]) -> dict[str, Any]:
    """Return the Run columns derived from a run's state (what every writer stores)."""
    usage = s["usage"]
    keys = {p["key"] for p in s["plan"]}
    done = sum(1 for k, st in s["steps"].items()
               if k in keys and st["status"] in (StepStatus.SUCCEEDED, StepStatus.SKIPPED))
    return {
        "current_step": s["current_step"] or "",
        "steps_total": len(s["plan"]),
        "steps_done": done,
        "plan_version": s["plan_version"],
        "tokens_used": usage["tokens"],
        "model_calls": usage["model_calls"],
        "tool_calls": usage["tool_calls"],
        "cost_micros": usage["cost_micros"],
    }


@dataclass
class RunSession:
    """A leased run being worked on by one worker."""

    run: Run
    state: dict[str, Any]
    agent: Agent
    worker: str
    client: ModelClient | None = None
    bytes_since_snapshot: int = 0
    last_snapshot_size: int = 0
    stopped: bool = False
    outcome: str = ""
    tool_limits: dict[str, Any] = field(default_factory=dict)
    # Ledger rows this session wrote, by tool_call_id: the tool phase right after a reply
    # needs them, and reading back what we just inserted would cost a round trip per unit.
    calls: dict[str, Any] = field(default_factory=dict)
    # Recent turns' model messages and fact lines (runs.engine.core.context), rebuilt on change.
    context_memo: dict[Any, tuple] = field(default_factory=dict)
    # The facts the tool offer last looked at for a paging cursor (ledger.services.paging).
    tools_memo: dict[str, Any] = field(default_factory=dict)
    # The run's secrets (sealed arguments + configured), read once; calls sealed later add theirs.
    secrets: Secrets = EMPTY
    # When each step this session started began (step latency, runs.engine.runtime.telemetry).
    step_started: dict[str, dt.datetime] = field(default_factory=dict)
    # Events applied to the state but written with the next unit (``defer``), and writers.
    deferred: list[NewEvent] = field(default_factory=list)
    deferred_also: list[Callable[[], Any]] = field(default_factory=list)
    # Read results (Settlements) deferred, then sent with a unit not yet known to have
    # committed: a lost lease records them as late results on a cancelled run (``loop``).
    riding: list[Any] = field(default_factory=list)
    unconfirmed: list[Any] = field(default_factory=list)
    # The attempt's OpenTelemetry trace (runs.engine.runtime.trace_spans); None when off.
    trace: Any = None
    # What the event recording the current model call says of it (runs.engine.runtime.model_turn).
    reply_marks: dict[str, Any] = field(default_factory=dict)
    loaded_bytes: int = -1  # the state's JSON size when the session opened (-1: measure it)

    def __post_init__(self) -> None:
        if self.loaded_bytes < 0:
            # The state is JSON only: the C encoder measures it faster than a walk would.
            self.loaded_bytes = len(json.dumps(self.state, ensure_ascii=False))

    def state_bytes(self) -> int:
        """Return about how big the state is now: its last measure plus the events since."""
        return (self.last_snapshot_size or self.loaded_bytes) + self.bytes_since_snapshot

    def model(self) -> ModelClient:
        """Return the run's model client (made on first use)."""
        if self.client is None:
            self.client = self.agent.model_client()
        return self.client

    def commit(self, events: Sequence[NewEvent], *, to: str | None = None, reason: str = "",
               detail: str = "", fields: dict[str, Any] | None = None,
               also: Sequence[Callable[[], Any]] = (), milestone: str = "",
               fence: bool = False, wait: bool = True) -> None:
        """Apply ``events`` to the state and commit them (and a status change) as one unit.

        ``fence``: this unit opens side effects. It commits only while this worker still
        holds the lease (version and owner checked in the same statement) and renews the
        lease in full, so the effects start with a whole TTL of lease ahead of them.
        ``wait=False`` (a fence opening reads only): sent like a progress unit (unit_overlap).
        """
        # Scrubbed before the state sees them: snapshots are made from this state.
        fresh = events_scrubbed(events, self.secrets)
        fields = fields_scrubbed(fields or {}, self.secrets)
        before = step_statuses(self.state, fresh)
        seq = self._apply(fresh)
        written, self.deferred = [*self.deferred, *fresh], []
        if to is not None:
            seq += 1
            reducer.apply(self.state, {"seq": seq, "type": "run.status", "data": {"to": to}})
        values = {**self.projection(), **(fields or {})}
        if to is None or to == RunStatus.RUNNING:
            values.update(self._lease_renewal(force=fence))
        extra = self._writers(written, before, also, milestone or ("rest" if to in _REST else ""))
        if to is None:
            # A progress unit goes out without waiting for its commit (unit_overlap): the
            # next unit, a release of the connection or the tick's end reads it.
            event_append(run=self.run, events=written, expected_version=self.run.version,
                         fields=values, also=extra, touch=False, secrets=self.secrets,
                         owner=self.worker if fence else "", overlap=not fence or not wait)
        else:
            run_transition(self.run, to, reason=reason, detail=self.secrets.scrub_text(detail),
                           events=written, fields=values, expected_version=self.run.version,
                           also=extra, secrets=self.secrets)
            if to != RunStatus.RUNNING:
                self.stopped = True
                self.outcome = to
        self._sent()
        # Counted, logged and traced once committed (a unit in flight: when it is read).
        unit_after_commit(lambda: telemetry.events_committed(self, written, ended=to if to in _ENDED else ""))

    def _writers(self, written: list[NewEvent], before: dict[str, str],
                 also: Sequence[Callable[[], Any]], phase: str) -> list[Callable[[], Any]]:
        """Return the unit's extra writers: ``also``, the Step rows, and a snapshot when due."""
        extra = [*self.deferred_also, *also,
                 *step_rows_writers(self.run.pk, written, self.state, before)]
        self.deferred_also = []
        if self._snapshot_due(phase):
            extra.append(self._snapshot(phase or "periodic"))
        return extra

    def _sent(self) -> None:
        """The unit carrying the riding read results went out (a failure before leaves them
        riding): they are confirmed once it committed."""
        if self.riding:
            self.unconfirmed, self.riding = self.riding, []
            unit_after_commit(self.unconfirmed.clear)

    def defer(self, events: Sequence[NewEvent], *, also: Sequence[Callable[[], Any]] = (),
              riding: Sequence[Any] = ()) -> None:
        """Apply ``events`` to the state now and write them (and ``also``) first in the next unit.

        Only for events that touch no step and whose loss the next executor makes good: a
        context compaction (derived again from the same state), a quick read's result
        (``tool_call``: its attempt is committed open, so a crash before the next unit runs
        the read again as its next attempt) or a reply held for its quick reads (lost with
        them: the model is asked again, ``read_rides``). Saves the unit's round trip and commit.
        """
        self._apply(events_scrubbed(events, self.secrets), deferred=True)
        self.deferred_also.extend(also)
        self.riding.extend(riding)

    def late(self) -> list[Any]:
        """Return the deferred read results no unit is known to have committed."""
        return [*self.unconfirmed, *self.riding]

    def _apply(self, events: Sequence[NewEvent], *, deferred: bool = False) -> int:
        """Apply ``events`` to the state after the deferred ones; return the last seq used."""
        seq = self.run.last_seq + len(self.deferred)
        for e in events:
            seq += 1
            reducer.apply(self.state, {"seq": seq, "type": e.type, "data": e.data})
            self.bytes_since_snapshot += len(e.data_json) + 64
            if deferred:
                self.deferred.append(e)
        return seq

    def _lease_renewal(self, *, force: bool = False) -> dict[str, Any]:
        """Return the lease columns to write with this unit: none while the lease is fresh.

        Units commit every few milliseconds; pushing the expiry (and ``updated_at``) forward
        on each would change indexed columns on every Run update. A third of the TTL is
        the most a lease ages before a commit renews it (the lease keeper renews at the same
        pace during long calls), so it never has less than two thirds of its TTL left.
        ``force`` (a fence) renews the expiry, which no index holds, but stamps ``updated_at``
        (indexed) at the same pace as the rest: a fence every other step would otherwise
        make every other Run update write all of the table's indexes (not HOT).
        """
        ttl = hot_setting("AGENTOPS_LEASE_TTL_S")
        now = clock.now()
        expires = self.run.lease_expires_at
        if not force and expires is not None and (expires - now).total_seconds() > ttl * 2 / 3:
            return {}
        renewal: dict[str, Any] = {"lease_expires_at": now + dt.timedelta(seconds=ttl)}
        stamped = self.run.updated_at
        if not force or stamped is None or (now - stamped).total_seconds() >= ttl / 3:
            renewal["updated_at"] = now
        return renewal

    def projection(self) -> dict[str, Any]:
        """Return the Run columns derived from the state."""
        return state_projection(self.state)

    def _snapshot_due(self, phase: str) -> bool:
        # Amortised: a snapshot costs its size, so take one only when the events since the
        # last one add up to at least that much. Bytes written per event stay O(event).
        floor = max(SNAPSHOT_MIN_BYTES, self.last_snapshot_size)
        if phase == "rest":
            # A resting run loads from a snapshot plus at most a few events: one this session
            # just took (a step's end, then the run's) serves, the rest replays in microseconds.
            return self.last_snapshot_size == 0 or self.bytes_since_snapshot >= _REST_TAIL_BYTES
        if phase:
            return self.bytes_since_snapshot >= SNAPSHOT_MIN_BYTES // 4
        return self.bytes_since_snapshot >= floor

    def _snapshot(self, phase: str) -> RowsInsert:
        snap, text = snapshot_with_text(run_id=self.run.pk, state=self.state, phase=phase,
                                        agent_version=self.run.agent_version)
        self.bytes_since_snapshot = 0
        self.last_snapshot_size = snap.size
        # The one-statement unit pastes the state's canonical text: jsonb stores the same value.
        return RowsInsert(Snapshot, [snap], json_texts=[{"state": text}])
