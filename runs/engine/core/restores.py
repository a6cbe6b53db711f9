"""Events that replace or charge a run's state from outside its turns (pure).

A rollback or an import carries the state it restores, so replaying the log needs no lookup;
usage spent outside the run's own turns (the drift side model, its child runs' shares) counts
against its budget; the guards (runs/engine/runtime/drift.py, selfcheck.py) and checkpoint
files (runs/checkpoints.py) write the rest.
"""
from __future__ import annotations

import copy
from typing import Any

from runs.event_types import EventType

State = dict[str, Any]
Event = dict[str, Any]


def rolled_back(state: State, d: dict[str, Any], e: Event) -> None:
    """run.rolled_back: the state at the checkpoint, keeping what the world already holds."""
    # The event carries the state at the checkpoint, so replaying the log needs no lookup.
    # Spent usage, recoveries and received signals are facts of the world: they stay. The
    # turn counter stays too, so calls made after the rollback get new ids and keys.
    kept = {k: state[k] for k in ("run", "usage", "recoveries", "signals", "status", "turn")}
    kept["exceptions"] = state.get("exceptions", []) + [{
        "kind": "rolled_back", "seq": e["seq"], "by": d.get("by", ""),
        "why": d.get("reason", "") or f"rolled back to event #{d['to_seq']}",
        "cancelled": d.get("cancelled", []), "handled_by_hand": d.get("ticked", [])}]
    rollbacks = state.get("rollbacks", 0) + 1
    restored = copy.deepcopy(d["state"])
    state.clear()
    state.update(restored)
    state.update(kept)
    state["rollbacks"] = rollbacks
    state["resumed"] = True
    state["wait"] = None
    state["notes"] = (restored.get("notes", []) + [f"rolled back to event #{d['to_seq']}"])[-10:]


def usage_charged(state: State, d: dict[str, Any], e: Event) -> None:
    """children.spent / guard.drift_scored: usage spent outside the run's turns."""
    # Spent outside the run's own turns (the drift side model, its child runs' shares):
    # it counts against the run's budget.
    for key in ("tokens", "model_calls", "tool_calls", "cost_micros"):
        state["usage"][key] += (d.get("usage") or {}).get(key, 0)


def self_checked(state: State, d: dict[str, Any], e: Event) -> None:
    """guard.self_checked: when the run last checked itself."""
    state["self_checked"] = e["seq"]


def imported(state: State, d: dict[str, Any], e: Event) -> None:
    """run.imported: the state of a checkpoint file, as the event carries it."""
    # Like a rollback, the event carries the state, so replaying the log needs no file.
    restored = copy.deepcopy(d["state"])
    restored.pop("self_checked", None)
    state.clear()
    state.update(restored)
    state["imported"] = {"seq": e["seq"], "turn": restored.get("turn", 0),
                         "from_run": d.get("from_run"), "from_seq": d.get("from_seq")}


def migrated(state: State, d: dict[str, Any], e: Event) -> None:
    """run.migrated: the agent version the run now runs on."""
    state["run"]["version"] = d.get("to_version", state["run"].get("version"))


HANDLERS = {
    EventType.RUN_ROLLED_BACK: rolled_back,
    EventType.CHILDREN_SPENT: usage_charged,
    EventType.GUARD_DRIFT_SCORED: usage_charged,
    EventType.GUARD_SELF_CHECKED: self_checked,
    EventType.RUN_IMPORTED: imported,
    EventType.RUN_MIGRATED: migrated,
}
