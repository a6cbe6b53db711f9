"""Audit rows for changes that are not operator actions (settings); the console reads them
through runs.selectors.audit_list."""
from __future__ import annotations

from typing import Any

from approvals.models import Intervention


def audit_record(*, actor: Any, action: str, reason: str = "", run: Any = None,
                 data: dict[str, Any] | None = None) -> Intervention:
    """Write an audit row for something that is not an operator action (e.g. a setting)."""
    return Intervention.objects.create(
        run=run, actor=actor if getattr(actor, "pk", None) else None,
        actor_name=actor.get_username() if hasattr(actor, "get_username") else str(actor or
                                                                                    "system"),
        action=action, reason=reason, data=data or {})
