"""Decide-and-next: the stuck run an operator settles after this one (the queue's order)."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q

from runs.models import Run
from runs.scope import Teams, scoped
from runs.statuses import STUCK


def run_next_stuck(*, after_id: Any, after_updated_at: dt.datetime, teams: Teams) -> Run | None:
    """Return the stuck run after this one, oldest first as the queue lists them, wrapping.

    ``after_updated_at`` is the run's time as the operator saw it: once they acted it moved
    to the end of the order, and the walk goes on from where it was.
    """
    stuck = scoped(Run.objects.filter(status__in=sorted(STUCK)), teams).exclude(pk=after_id)
    later = stuck.filter(Q(updated_at__gt=after_updated_at)
                         | Q(updated_at=after_updated_at, pk__gt=after_id))
    return (later.order_by("updated_at", "id").first()
            or stuck.order_by("updated_at", "id").first())
