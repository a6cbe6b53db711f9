"""Notification records: routing rules, SLA clocks, the outbox (deliveries) and its attempts.

Imported by approvals.models, so Django registers them under the ``approvals`` app.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from approvals.statuses import AttemptStatus, DeliveryStatus, NotifyStage, NotifySubject
from runs.models.team import default_team_id


class NotifyRule(models.Model):
    """Which approvals and stuck runs go to which group and channel, with what SLA.

    A rule belongs to a team and routes only that team's runs and approvals. Blank match
    fields match anything. Every matching enabled rule sends; the first by ``order``
    assigns the approval to its group.
    """

    team = models.ForeignKey("runs.Team", on_delete=models.PROTECT, related_name="notify_rules",
                             default=default_team_id)
    name = models.CharField(max_length=100)
    order = models.PositiveIntegerField(default=100)
    enabled = models.BooleanField(default=True)
    subject = models.CharField(max_length=16, choices=NotifySubject.choices, blank=True,
                               help_text="approval, stuck run, or blank for both")
    agent = models.CharField(max_length=100, blank=True)
    tool = models.CharField(max_length=100, blank=True)
    risk = models.CharField(max_length=16, blank=True, help_text="an approval's risk")
    failure_class = models.CharField(max_length=60, blank=True,
                                     help_text="a stuck run's reason, e.g. retry_exhausted")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    channel = models.CharField(max_length=60, help_text="a channel in AGENTOPS_NOTIFY_CHANNELS")
    sla_s = models.PositiveIntegerField(default=0, help_text="0: no reminder or escalation")
    escalate_to = models.ForeignKey("auth.Group", null=True, blank=True,
                                    on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["order", "id"]

    def __str__(self) -> str:
        return f"rule {self.name} → {self.channel}"


class NotifyTrack(models.Model):
    """The SLA clock of one approval or one stuck episode of a run, per matching rule."""

    key = models.CharField(max_length=120, unique=True)
    subject = models.CharField(max_length=16, choices=NotifySubject.choices)
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="notify_tracks")
    approval = models.ForeignKey("approvals.Approval", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="notify_tracks")
    rule = models.ForeignKey(NotifyRule, null=True, on_delete=models.SET_NULL, related_name="+")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    stage = models.CharField(max_length=16, choices=NotifyStage.choices,
                             default=NotifyStage.NOTIFY)
    due_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["closed_at", "due_at"], name="notifytrack_due")]

    def __str__(self) -> str:
        return f"track {self.key} ({self.stage})"


class Delivery(models.Model):
    """One message to one recipient on one channel: the outbox row, written with its cause.

    ``key`` is the idempotency key: unique here (one event never makes two deliveries) and
    sent with the message (webhook header, email Message-ID) so a receiver can dedupe.
    """

    key = models.CharField(max_length=64, unique=True)
    track = models.ForeignKey(NotifyTrack, on_delete=models.CASCADE, related_name="deliveries")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="deliveries")
    approval = models.ForeignKey("approvals.Approval", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="deliveries")
    stage = models.CharField(max_length=16, choices=NotifyStage.choices)
    channel = models.CharField(max_length=60)
    kind = models.CharField(max_length=16)
    recipient = models.CharField(max_length=254)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    group_name = models.CharField(max_length=150, blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices,
                              default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["status", "next_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"delivery {self.key[:8]} {self.channel} → {self.recipient} ({self.status})"


class DeliveryAttempt(models.Model):
    """One try to send a delivery: opened when a worker claims it, closed after the send."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="tries")
    n = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=AttemptStatus.choices,
                              default=AttemptStatus.SENDING)
    worker = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    response = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery_id", "n"]
        constraints = [models.UniqueConstraint(fields=["delivery", "n"],
                                               name="delivery_attempt_unique")]

    def __str__(self) -> str:
        return f"attempt {self.n} of {self.delivery_id} ({self.status})"
