"""Approvals, the intervention audit log and API keys in Django admin."""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

from agentops.admin_readonly import ReadOnlyAdmin
from approvals.apikeys import apikey_revoke
from approvals.models import ApiKey, Approval, Delivery, DeliveryAttempt, Intervention, NotifyRule


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    """Approvals; decide them in the console's inbox."""

    list_display = ("id", "run", "tool", "status", "created_at")
    list_filter = ("status", "tool")
    search_fields = ("run__id", "tool")


@admin.register(NotifyRule)
class NotifyRuleAdmin(ReadOnlyAdmin):
    """Routing rules; edit them on the console's Settings page (audited)."""

    list_display = ("name", "team", "order", "enabled", "subject", "group", "channel", "sla_s",
                    "escalate_to")


class DeliveryAttemptInline(admin.TabularInline):
    """Each try to send a delivery, read-only."""

    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("n", "status", "worker", "started_at", "finished_at", "response", "error")

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        """Refuse: attempts are written by the sender."""
        return False


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    """The notification outbox with its attempt log."""

    list_display = ("id", "run", "stage", "channel", "recipient", "status", "attempts",
                    "sent_at")
    list_filter = ("status", "channel", "stage")
    search_fields = ("run__id", "recipient", "key")
    inlines = (DeliveryAttemptInline,)


@admin.register(Intervention)
class InterventionAdmin(ReadOnlyAdmin):
    """The audit log of every operator action."""

    list_display = ("id", "action", "actor", "run", "at")
    list_filter = ("action",)
    search_fields = ("run__id", "action")


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    """API keys (hashes only); create them with ``manage.py agentops createuser --api-key``."""

    list_display = ("prefix", "name", "user", "team", "role", "created_at", "expires_at",
                    "last_used_at", "revoked_at")
    list_filter = ("team", "role", "revoked_at")
    search_fields = ("prefix", "name", "user__username")
    exclude = ("key_hash", "previous_hash")
    actions = ("revoke",)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        """Allow the revoke action (the only change offered) to superusers."""
        return obj is None and request.user.is_superuser

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: Any, queryset: Any) -> None:
        """Revoke each selected key (revoking twice keeps the first time)."""
        for key in queryset:
            apikey_revoke(user=key.user, key_id=key.pk)
        messages.success(request, f"Revoked {queryset.count()} key(s).")
