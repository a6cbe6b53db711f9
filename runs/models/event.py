"""The append-only event log: the truth from which every run projection is derived."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, models
from django.db.models import DateField, Q, QuerySet, Subquery
from django.db.models.functions import Cast, TruncMonth

CURRENT_EVENT_SCHEMA = 1
# Written on every step: left out of the (run, type, seq) index (see Event.Meta).
PER_STEP_TYPES = ("model.replied", "model.requested", "tool.result")


def run_month(created_at: dt.datetime) -> dt.date:
    """Return the first day of the UTC month a run was created in: its events' partition key."""
    return created_at.astimezone(dt.timezone.utc).date().replace(day=1)


def event_month(run: Any) -> dt.date:
    """Return the partition key of ``run``'s events (its creation month; read once per object).

    Kept with the creation time it came from, so a run whose ``created_at`` was reloaded
    with another value (a test moving a run into the past) gets its month again.
    """
    created = run.__dict__.get("created_at")
    kept = run.__dict__.get("_event_month")
    if kept is not None and (created is None or kept[0] == created):
        return kept[1]
    if created is None:  # a Run loaded with only()/defer(): one read, then kept
        created = type(run).objects.filter(pk=run.pk).values_list("created_at", flat=True).get()
    run.__dict__["_event_month"] = (created, run_month(created))
    return run.__dict__["_event_month"][1]


class RunMonthField(models.DateField):
    """The month of the event's run; filled from the run when the writer did not set it."""

    def pre_save(self, model_instance: Any, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if value is None:
            value = run_month(model_instance.run.created_at)
            setattr(model_instance, self.attname, value)
        return value


class Event(models.Model):
    """One fact about a run, at a dense per-run sequence number."""

    # (run, seq) is unique, which indexes run already: no second index on the hot insert path.
    # No database FK check either (see ledger.models.ToolCall.run): integrity by construction.
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, related_name="events", db_index=False,
        db_constraint=False,
    )
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict, blank=True)
    tool_call_id = models.CharField(max_length=40, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    key = models.CharField(max_length=200, null=True, blank=True)
    schema_version = models.PositiveSmallIntegerField(default=CURRENT_EVENT_SCHEMA)
    actor = models.CharField(max_length=150, blank=True)
    # Why it happened: ``seq:N`` (an earlier event of this run) or a root (agentops.causes).
    caused_by = models.CharField(max_length=80, blank=True, default="")
    at = models.DateTimeField()
    # On PostgreSQL the table is partitioned by this (runs.partitions): every event of a run
    # is in its run's month, so (run, seq, run_month) is unique exactly when (run, seq) is.
    run_month = RunMonthField()

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            # PostgreSQL wants the partition key in every unique index; run_month is a
            # function of run, and a key names a fact of one run (a signal's, a call's).
            models.UniqueConstraint(fields=["run", "seq", "run_month"], name="event_unique_seq"),
            models.UniqueConstraint(
                fields=["key", "run_month"], name="event_unique_key",
                condition=Q(key__isnull=False)
            ),
            models.CheckConstraint(condition=Q(seq__gte=1), name="event_seq_positive"),
        ]
        indexes = [
            # Partial: the per-step types (a model request and reply, a tool result: ~all of
            # a run's events) are left out, so a step writes no entry here. Queries for them
            # are per run and walk event_unique_seq, where they are a third of the rows;
            # the rare types (step, status, restore markers) keep their direct lookup.
            models.Index(fields=["run", "type", "seq"], name="event_run_type",
                         condition=~Q(type__in=PER_STEP_TYPES)),
            models.Index(
                fields=["tool_call_id"], name="event_tool_call", condition=~Q(tool_call_id="")
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


def run_events(run: Any) -> QuerySet[Event]:
    """Return the events of ``run`` (a Run, or a run's id) in its month's partition only.

    With a Run the month is a constant, so PostgreSQL's planner reads that one partition;
    with an id the month is read from the run inside the same statement, and the partitions
    it rules out are skipped when the query starts. Every per-run read of the log goes here.
    """
    if isinstance(run, models.Model):
        return Event.objects.filter(run_id=run.pk, run_month=event_month(run))
    if connection.vendor != "postgresql":  # one plain table: nothing to prune
        return Event.objects.filter(run_id=run)
    return Event.objects.filter(run_id=run, run_month=Subquery(run_month_sql(run)))


def run_month_sql(run_id: Any) -> QuerySet:
    """Return a one-value query of ``run_id``'s month (the SQL twin of ``run_month``)."""
    runs = Event._meta.get_field("run").related_model.objects
    month = TruncMonth("created_at", tzinfo=dt.timezone.utc)
    return runs.filter(pk=run_id).values(month=Cast(month, DateField()))[:1]
