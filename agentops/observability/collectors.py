"""Gauges computed from the database at scrape time: runs, the queue, approvals, workers."""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Min, QuerySet
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from agentops import clock
from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from runs.engine.runtime.selfcheck import attempts_running_unleased
from runs.models import Run, WorkerHeartbeat
from runs.models.team import DEFAULT_TEAM_SLUG
from runs.statuses import RunStatus

log = logging.getLogger(__name__)


def _age_seconds(oldest: dt.datetime | None, now: dt.datetime) -> float:
    return max((now - oldest).total_seconds(), 0.0) if oldest else 0.0


def _backlog(rows: QuerySet, *, since: str, now: dt.datetime, count: tuple[str, str],
             age: tuple[str, str]) -> Iterator[Metric]:
    """Yield a gauge of how many ``rows`` wait and one of how long the oldest has (by ``since``)."""
    agg = rows.aggregate(n=Count("id"), oldest=Min(since))
    yield GaugeMetricFamily(*count, value=agg["n"])
    yield GaugeMetricFamily(*age, value=_age_seconds(agg["oldest"], now))


def heartbeat_max_age_s() -> float:
    """Return how old the newest worker heartbeat may be before workers count as gone."""
    return float(getattr(settings, "AGENTOPS_HEARTBEAT_MAX_AGE_S", 60.0))


class DatabaseCollector:
    """Collect fleet gauges with a handful of aggregate queries per scrape."""

    def collect(self) -> Iterator[Metric]:
        """Yield the gauges, or ``agentops_metrics_database_up 0`` when the database fails."""
        up = GaugeMetricFamily(
            "agentops_metrics_database_up",
            "1 when the scrape could read the database, else 0.",
        )
        try:
            families = list(self._families(clock.now()))
        except DatabaseError:
            log.warning("metrics scrape could not read the database", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, now: dt.datetime) -> Iterator[Metric]:
        yield self._runs()
        yield from self._queue(now)
        yield from self._approvals(now)
        yield self._workers(now)
        yield self._stragglers()

    def _runs(self) -> Metric:
        family = GaugeMetricFamily(
            "agentops_runs",
            "Runs by status, attention reason (empty unless blocked) and owning team (slug).",
            labels=["status", "reason", "team"],
        )
        # Teams are few (an organisation's teams, not its users): the label stays bounded.
        rows = (Run.objects.order_by().values("status", "attention_reason", "team__slug")
                .annotate(n=Count("id")))
        counts = {(r["status"], r["attention_reason"] or "", r["team__slug"]): r["n"]
                  for r in rows}
        for status in RunStatus.values:
            # every status always has a series (in the default team)
            counts.setdefault((status, "", DEFAULT_TEAM_SLUG), 0)
        for (status, reason, team), n in sorted(counts.items()):
            family.add_metric([status, reason, team], n)
        return family

    def _queue(self, now: dt.datetime) -> Iterator[Metric]:
        return _backlog(
            Run.objects.filter(status=RunStatus.QUEUED), since="updated_at", now=now,
            count=("agentops_queue_depth", "Runs queued and waiting for a worker."),
            age=("agentops_queue_oldest_age_seconds",
                 "Seconds since the oldest queued run last changed (0 when the queue is empty)."),
        )

    def _approvals(self, now: dt.datetime) -> Iterator[Metric]:
        return _backlog(
            Approval.objects.filter(status=ApprovalStatus.PENDING), since="created_at", now=now,
            count=("agentops_approvals_pending", "Approvals waiting for a decision."),
            age=("agentops_approvals_oldest_age_seconds",
                 "Age in seconds of the oldest pending approval (0 when none)."),
        )

    def _stragglers(self) -> Metric:
        family = GaugeMetricFamily(
            "agentops_attempts_running_without_lease",
            "Tool-call attempts running while their run holds no live lease, by run status. "
            "A recovered, queued run counts until its next tick reconciles the call; any other "
            "status is a straggler nobody will close (should be 0).",
            labels=["run_status"],
        )
        counts = attempts_running_unleased()
        for status in RunStatus.values:
            family.add_metric([status], counts.get(status, 0))
        return family

    def _workers(self, now: dt.datetime) -> Metric:
        since = now - dt.timedelta(seconds=heartbeat_max_age_s())
        alive = WorkerHeartbeat.objects.filter(seen_at__gte=since).count()
        return GaugeMetricFamily(
            "agentops_workers_alive",
            "Worker processes whose heartbeat is recent (AGENTOPS_HEARTBEAT_MAX_AGE_S).",
            value=alive,
        )
