"""Before a recovered or long-waiting run goes on: is the world still the one it started in?

Two things can change while nobody holds a run. Its requester (the operator who last acted
on it, else the user who started it) may have been deactivated or lost the operators role
(approvals.roles.can_operate: who may run runs); and a resource one of its tools uses may be
at another version (a tool's ``version_probe``, asked when the run first used the tool). The
worker asks both right after it claims a run whose last event is a recovery or the end of a
wait of at least AGENTOPS_WORLD_RECHECK_AFTER_S (its state's ``recheck`` mark) and writes
``world.checked`` when nothing changed (one commit, on these paths only); on a change it
blocks the run (``world_changed``) with a ``world.changed`` event holding each change,
before and now.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings

from agentops import clock
from approvals.models import Intervention
from approvals.roles import can_operate, user_roles
from ledger.models import ToolCall
from runs.engine.core.world import recheck_due, version_changes
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.outcomes import block
from runs.engine.runtime.session import RunSession
from runs.event_types import EventType
from runs.models import Run
from runs.models.event import run_events

log = logging.getLogger(__name__)
MAX_VERSION = 200


def waited_s(run: Run) -> float:
    """Return how long a waiting run has waited: since it last changed (it went waiting)."""
    return round(max((clock.now() - run.updated_at).total_seconds(), 0.0), 3) \
        if run.updated_at else 0.0


def versions_first_used(session: RunSession, calls: list[ToolCall]) -> list[NewEvent]:
    """Return a ``resource.version`` event for each tool with a version probe that the run
    calls for the first time (written with the commit that opens the calls' attempts)."""
    seen, out = session.state.get("resources") or {}, []
    for c in calls:
        spec = session.agent.tool(c.tool)
        if spec is None or spec.version_probe is None or c.tool in seen \
                or any(e.data["tool"] == c.tool for e in out):
            continue
        try:
            version = _text(spec.version_probe())
        except Exception as exc:  # a probe that fails is asked again at the next first use
            log.warning("version probe of %s failed: %s", c.tool, exc)
            continue
        out.append(NewEvent(EventType.RESOURCE_VERSION, {"tool": c.tool, "version": version}))
    return out


def world_recheck(session: RunSession) -> bool:
    """Re-check the world if the run comes back from a recovery or a long wait; return True
    when it changed (the run is then blocked, each change in its ``world.changed`` event)."""
    why = recheck_due(session.state, after_s=settings.AGENTOPS_WORLD_RECHECK_AFTER_S)
    if not why:
        return False
    seen = session.state.get("resources") or {}
    now = _versions_now(session, seen)
    changes = requester_changes(session.run) + version_changes(seen, now)
    if not changes:
        session.commit([NewEvent(EventType.WORLD_CHECKED, {"why": why, "versions": now})])
        return False
    detail = "the world changed while this run waited: " + "; ".join(
        f"{c['what']} was {c['before']}, now {c['now']}" for c in changes)
    block(session, "world_changed", detail, events=[NewEvent(
        EventType.WORLD_CHANGED, {"why": why, "changes": changes})])
    return True


def requester_changes(run: Run) -> list[dict[str, Any]]:
    """Return the change in the requester's right to run ``run`` ([] when it still holds)."""
    row = (Intervention.objects.filter(run=run, action__startswith="run.")
           .select_related("actor").order_by("-at", "-pk").first())
    user, name = (row.actor, row.actor_name) if row else (run.created_by, "")
    if row is None and user is None:
        return []  # started by the system (no person): nobody's right to check
    name = name or user.get_username()
    change = {"kind": "permission", "subject": name, "what": f"{name}'s right to run it",
              "before": "may run it (operators)"}
    if user is None:
        return [{**change, "now": "the account was deleted"}]
    if not user.is_active:
        return [{**change, "now": "the account is deactivated"}]
    if not can_operate(user, run.team_id):  # the right counts in the run's team
        held = ", ".join(sorted(user_roles(user, run.team_id))) or "no role"
        return [{**change, "now": f"no longer an operator in the run's team (holds {held})"}]
    return []


def _versions_now(session: RunSession, seen: dict[str, Any]) -> dict[str, Any]:
    now = {}
    for name in seen:
        spec = session.agent.tool(name)
        if spec is None or spec.version_probe is None:
            continue
        try:
            now[name] = _text(spec.version_probe())
        except Exception as exc:  # cannot tell it is the same: a change a person looks at
            now[name] = f"unreadable ({type(exc).__name__}: {str(exc)[:120]})"
    return now


def _text(version: Any) -> str:
    return str(version)[:MAX_VERSION]


def world_change_last(run: Run) -> dict[str, Any] | None:
    """Return the newest ``world.changed`` event of a run blocked by it (for its panel), or None."""
    if run.attention_reason != "world_changed":
        return None
    row = (run_events(run).filter(type=EventType.WORLD_CHANGED).order_by("-seq")
           .values("seq", "at", "data").first())
    if row is None:
        return None
    return {"seq": row["seq"], "at": row["at"].isoformat() if isinstance(row["at"], dt.datetime)
            else row["at"], "why": row["data"].get("why", ""),
            "changes": row["data"].get("changes", [])}
