"""The outside world as a run last saw it: resource versions, and when to look again (pure).

A tool may declare ``version_probe``; the version it answers when a run first uses the tool is
kept in ``state["resources"]`` (``resource.version``). A recovery (``run.recovered``) or the end
of a wait (``wait.ended``) marks the state ``recheck``: before the run goes on, the engine
(runs.engine.runtime.world) asks again and writes ``world.checked`` (nothing changed) or blocks
with ``world.changed``, whose changes the reducer adopts (a person who then retries accepts
the world as it is now). Either clears the mark.
"""
from __future__ import annotations

from typing import Any

from runs.event_types import EventType

State = dict[str, Any]
Event = dict[str, Any]


def version_seen(state: State, d: dict[str, Any], e: Event) -> None:
    """resource.version: the version the run saw when it first used the tool."""
    state.setdefault("resources", {})[d["tool"]] = d["version"]


def world_checked(state: State, d: dict[str, Any], e: Event) -> None:
    """world.checked / world.changed: the re-check is done; the versions found now replace
    the ones first seen (a person who retries the blocked run accepts them)."""
    state.pop("recheck", None)
    resources = state.setdefault("resources", {})
    for change in d.get("changes", []):
        if change.get("kind") == "version":
            resources[change["subject"]] = change["now"]


def recheck_mark(state: State, e: Event, why: str, waited_s: float = 0.0) -> None:
    """Mark that the world must be looked at again before the run goes on from ``e``."""
    state["recheck"] = {"why": why, "seq": e["seq"], "waited_s": waited_s}


def recheck_due(state: State, *, after_s: float) -> str:
    """Return why the world must be re-checked now ("" when not): the run came back from a
    recovery, or from a wait of at least ``after_s`` seconds, and was not re-checked since."""
    mark = state.get("recheck")
    if not mark:
        return ""
    if mark["why"] == "wait" and mark.get("waited_s", 0) < after_s:
        return ""
    return mark["why"]


def version_changes(seen: dict[str, Any], now: dict[str, Any]) -> list[dict[str, Any]]:
    """Return each resource whose version now differs from the one first seen."""
    return [{"kind": "version", "subject": tool, "what": f"{tool} version",
             "before": before, "now": now[tool]}
            for tool, before in sorted(seen.items()) if tool in now and now[tool] != before]


HANDLERS = {EventType.RESOURCE_VERSION: version_seen, EventType.WORLD_CHECKED: world_checked,
            EventType.WORLD_CHANGED: world_checked}
