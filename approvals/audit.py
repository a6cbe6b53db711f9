"""The audit log: every decision, action and settings change, filterable by who, what, when."""
from __future__ import annotations

import datetime as dt
from typing import Any

from approvals.models import Intervention

AUDIT_LIMIT = 200


def audit_query(*, actor: Any = None, run_id: Any = None, action: str = "",
                since: dt.datetime | None = None, until: dt.datetime | None = None,
                before_id: int | None = None, limit: int = 50) -> list[Intervention]:
    """Return audit rows newest first, filtered; ``action`` "run." (or "run.*") is a prefix.

    ``actor`` is a user or a username; ``before_id`` pages backwards from an earlier page.
    """
    qs = Intervention.objects.select_related("run")
    if actor is not None and actor != "":
        qs = qs.filter(actor_name=getattr(actor, "get_username", lambda: actor)())
    if run_id:
        qs = qs.filter(run_id=run_id)
    if action:
        prefix = action.rstrip("*")
        qs = qs.filter(action__startswith=prefix) if prefix.endswith(".") else qs.filter(
            action=action)
    if since is not None:
        qs = qs.filter(at__gte=since)
    if until is not None:
        qs = qs.filter(at__lt=until)
    if before_id is not None:
        qs = qs.filter(id__lt=before_id)
    return list(qs.order_by("-at", "-id")[:max(1, min(limit, AUDIT_LIMIT))])


def audit_record(*, actor: Any, action: str, reason: str = "", run: Any = None,
                 data: dict[str, Any] | None = None) -> Intervention:
    """Write an audit row for something that is not an operator action (e.g. a setting)."""
    return Intervention.objects.create(
        run=run, actor=actor if getattr(actor, "pk", None) else None,
        actor_name=actor.get_username() if hasattr(actor, "get_username") else str(actor or
                                                                                    "system"),
        action=action, reason=reason, data=data or {})
