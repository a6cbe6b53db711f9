"""Version pinning: move a run whose agent version is gone to a registered newer version.

A run is pinned to the agent version it started with. When a worker no longer has that
version, a migrator registered with ``registry.register_migrator`` adapts the run through
events (so replaying the log still gives the same state) and re-pins it; without one the run
blocks with ``version_mismatch``.
"""
from __future__ import annotations

from agentops.agents import Agent, registry
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.snapshots import load_state
from runs.event_types import EventType
from runs.models import Run


def agent_migrate(run: Run, state: dict) -> tuple[Agent, dict] | None:
    """Migrate the leased ``run`` to a deployed version; return (agent, state) or None."""
    path = registry.migration_path(run.agent_name, run.agent_version)
    if not path:
        return None
    events: list[NewEvent] = []
    version = run.agent_version
    for to_version, fn in path:
        for e in fn(state) or []:
            events.append(NewEvent(e["type"], e.get("data", {})))
        events.append(NewEvent(EventType.RUN_MIGRATED, {"from": version, "to": to_version}))
        version = to_version
    event_append(run=run, events=events, expected_version=run.version,
                 fields={"agent_version": version})
    return registry.get(run.agent_name, version), load_state(run)
