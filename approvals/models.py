"""Approvals, operator interventions (the audit log), API keys and team memberships."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from approvals.audit_models import AuditSequence, AuditSinkCursor
from approvals.notify.models import Delivery, DeliveryAttempt, NotifyRule, NotifyTrack
from approvals.roles import TEAM_ROLES
from approvals.statuses import ApprovalStatus, ExpiryOutcome

__all__ = ["ApiKey", "Approval", "AuditSequence", "AuditSinkCursor", "Delivery", "DeliveryAttempt",
           "Intervention", "Membership", "NotifyRule", "NotifyTrack"]


class Approval(models.Model):
    """A request for a person to approve one tool call with exact arguments."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="approvals")
    tool_call = models.ForeignKey(
        "ledger.ToolCall", on_delete=models.CASCADE, related_name="approvals"
    )
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    tool = models.CharField(max_length=100)
    proposed_args = models.JSONField(default=dict)
    approved_args = models.JSONField(null=True, blank=True)
    risk = models.CharField(max_length=16, default="medium")
    why = models.CharField(max_length=300, blank=True)
    state_seq = models.BigIntegerField(help_text="run seq the approval was asked at")
    plan_version = models.PositiveIntegerField(default=0)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_outcome = models.CharField(
        max_length=16, choices=ExpiryOutcome.choices, default=ExpiryOutcome.DENY
    )
    escalated = models.BooleanField(default=False)
    # The group whose members should decide it (approvals.notify routing; the escalation
    # moves it to the next group). Anyone with the support role still may.
    assigned_group = models.ForeignKey("auth.Group", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="+")
    # How many distinct people (never the requester) must approve before the call runs.
    approvers_required = models.PositiveSmallIntegerField(default=1)
    # Bumped when the arguments to approve change (an edit under the two-person rule): a
    # decision link or an approval given on an older version no longer counts.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="approval_status_expiry"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tool_call"],
                condition=Q(status=ApprovalStatus.PENDING),
                name="approval_one_pending_per_call",
            ),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in ApprovalStatus]),
                name="approval_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} {self.tool} ({self.status})"


class ApprovalVote(models.Model):
    """One person's decision on an approval that needs several (the two-person rule)."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    approve = models.BooleanField()
    version = models.PositiveIntegerField(help_text="the approval version decided on")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["approval", "user"], name="approval_vote_once"),
        ]

    def __str__(self) -> str:
        return f"vote {self.user_id} on approval {self.approval_id} v{self.version}"


class UsedDecisionLink(models.Model):
    """A decision link (or Slack interaction) already acted on: its nonce, used once."""

    nonce = models.CharField(max_length=80, unique=True)
    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                             related_name="+")
    action = models.CharField(max_length=20)
    used_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"used link {self.nonce[:8]}… ({self.action})"


class Intervention(models.Model):
    """The audit row of a person's action: who, when, why, what it changed."""

    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="interventions"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=60)
    reason = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    # What stopped the run when the person pressed (failure meaning:tool, "" when it was not
    # stuck): approvals.recommend.precedent reads the last choices made for the same one.
    signature = models.CharField(max_length=120, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The team whose run or setting this row is about (None: installation-wide settings);
    # the audit export scopes team admins by it. Filled from the run when not given.
    team = models.ForeignKey("runs.Team", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    # The export order, given after commit in commit order (audit_models.AuditSequence says
    # why not the id); None until numbered. The export's and the sink's cursor.
    seq = models.BigIntegerField(null=True, blank=True, unique=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["id"], condition=Q(seq__isnull=True),
                         name="intervention_unnumbered"),
            models.Index(fields=["run", "-at"], name="intervention_run"),
            models.Index(fields=["signature", "-at"], name="intervention_signature"),
            models.Index(fields=["action", "-at"], name="intervention_action"),
            models.Index(fields=["actor", "-at"], name="intervention_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Save, naming the run's team when no team was given."""
        if self.team_id is None and self.run_id is not None:
            self.team_id = self.run.team_id
        super().save(*args, **kwargs)


class ApiKey(models.Model):
    """A person's API key for one team and one role; only its hash is stored, shown once.

    What a request with it may do: the key's role, capped by what its owner holds in its
    team now (approvals.roles, KeyScope). Rotation keeps the row and gives a new secret; the
    old one keeps working until ``previous_until`` (a grace period) or not at all.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    team = models.ForeignKey("runs.Team", on_delete=models.PROTECT, related_name="api_keys")
    role = models.CharField(max_length=20, choices=[(r, r) for r in TEAM_ROLES])
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    previous_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    previous_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class Membership(models.Model):
    """A person's role in one team (a person can be operator in one team, viewer in another)."""

    team = models.ForeignKey("runs.Team", on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    role = models.CharField(max_length=20, choices=[(r, r) for r in TEAM_ROLES])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "user"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_one_per_team"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} in {self.team}"
