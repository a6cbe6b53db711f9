"""Django admin base for AgentOps models: look, never touch.

Runs, steps, events, snapshots and the ledger change only through the engine's transition
functions and operator actions (which write the audit row); budgets and tool limits through
the audited settings pages and API. The admin shows them for inspection and support.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """A ModelAdmin that lists and shows rows but offers no add, change or delete."""

    list_per_page = 50
    show_full_result_count = False  # COUNT(*) over the event log is slow on big installs

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        """Refuse: rows are created by the engine and the audited services."""
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        """Refuse: a change here would skip the state machine and the audit."""
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        """Refuse: the log is append-only (retention runs through agentops_prune)."""
        return False
