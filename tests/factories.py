"""Test data builders."""
from __future__ import annotations

from typing import Any

from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Run


def make_run(*, goal: str = "test goal", agent: str = "test-agent", version: str = "1",
             plan: list[dict[str, Any]] | None = None, **fields: Any) -> Run:
    """Create a queued run and append its run.created event."""
    run = Run.objects.create(agent_name=agent, agent_version=version, goal=goal, **fields)
    event_append(
        run=run,
        events=[
            NewEvent(
                "run.created",
                {"agent": agent, "version": version, "goal": goal, "input": {},
                 "plan": plan or [{"key": "main", "title": "main"}]},
            )
        ],
    )
    return run
