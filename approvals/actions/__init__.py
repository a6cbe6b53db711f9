"""What an operator can press: one module per verb; the registry lists them (see registry.py)."""
from __future__ import annotations

from approvals.actions.registry import (
    ACTIONS,
    APPROVAL_ACTIONS,
    BULK_ACTIONS,
    RUN_ACTIONS,
    action_for,
    actions_for,
)

action_get = action_for  # the older name

__all__ = ["ACTIONS", "APPROVAL_ACTIONS", "BULK_ACTIONS", "RUN_ACTIONS", "action_for",
           "action_get", "actions_for"]
