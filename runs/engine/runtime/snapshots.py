"""Snapshots: write the full state at milestones; load = latest snapshot + tail of events.

Old snapshots are upgraded by registered migrators (one per schema version step); a version
with no migrator fails with UnknownSchemaVersion naming both versions.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from agentops.jsonstate import canonical_json, check_json
from runs.engine.core import reducer
from runs.engine.runtime.events import event_tail
from runs.errors import UnknownSchemaVersion
from runs.models import Snapshot
from runs.models.snapshot import CURRENT_STATE_SCHEMA

Migrator = Callable[[dict[str, Any]], dict[str, Any]]
_MIGRATORS: dict[int, Migrator] = {}


def register_migrator(from_version: int) -> Callable[[Migrator], Migrator]:
    """Register a function that upgrades a state of ``from_version`` to the next version."""

    def deco(fn: Migrator) -> Migrator:
        _MIGRATORS[from_version] = fn
        return fn

    return deco


def migrate_state(state: dict[str, Any], version: int) -> dict[str, Any]:
    """Return ``state`` upgraded from schema ``version`` to the current one."""
    while version < CURRENT_STATE_SCHEMA:
        fn = _MIGRATORS.get(version)
        if fn is None:
            raise UnknownSchemaVersion(
                f"state schema {version} has no migrator to {version + 1} "
                f"(this code reads schema {CURRENT_STATE_SCHEMA})",
                found=version,
                current=CURRENT_STATE_SCHEMA,
            )
        state, version = fn(state), version + 1
    if version > CURRENT_STATE_SCHEMA:
        raise UnknownSchemaVersion(
            f"state schema {version} is newer than this code's {CURRENT_STATE_SCHEMA}: "
            "upgrade AgentOps on this host",
            found=version,
            current=CURRENT_STATE_SCHEMA,
        )
    return state


def snapshot_build(*, run_id: Any, state: dict[str, Any], phase: str, agent_version: str) -> Snapshot:
    """Return an unsaved Snapshot of ``state`` (checked to be JSON, with size and sha256)."""
    return snapshot_with_text(run_id=run_id, state=state, phase=phase,
                              agent_version=agent_version)[0]


def snapshot_with_text(*, run_id: Any, state: dict[str, Any], phase: str,
                       agent_version: str) -> tuple[Snapshot, str]:
    """Return ``snapshot_build``'s Snapshot and the canonical JSON text of its state."""
    check_json(state, "$state")
    text = canonical_json(state)
    data = text.encode()
    return Snapshot(
        run_id=run_id,
        seq=state["seq"],
        phase=phase,
        state=state,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        schema_version=CURRENT_STATE_SCHEMA,
        agent_version=agent_version,
    ), text


def load_state(run: Any, *, upto_seq: int | None = None) -> dict[str, Any]:
    """Return the state of a run: its latest snapshot (at or before ``upto_seq``) + the tail.

    ``run`` is the Run or its id; given the Run, the tail is read from its partition only.
    """
    snaps = Snapshot.objects.filter(run_id=getattr(run, "pk", run))
    if upto_seq is not None:
        snaps = snaps.filter(seq__lte=upto_seq)
    snap = snaps.order_by("-seq").values("seq", "state", "schema_version").first()
    tail = event_tail(run, snap["seq"] if snap else 0)
    if upto_seq is not None:
        tail = [e for e in tail if e["seq"] <= upto_seq]
    return state_build(snap, tail)


def state_build(snap: dict[str, Any] | None, tail: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a state from a snapshot (``seq``, ``state``, ``schema_version``; None: the run
    has none) and the events after it, in order."""
    base = (reducer.empty_state() if snap is None
            else migrate_state(snap["state"], snap["schema_version"]))
    for event in tail:
        reducer.apply(base, event)
    return base


def replay_state(run: Any) -> dict[str, Any]:
    """Return the state rebuilt from the whole event log (of the Run, or its id), no snapshots."""
    return reducer.fold(reducer.empty_state(), event_tail(run, 0))
