"""Read-side queries of the demo world: its side effects, newest first, keyset-paginated.

Models are imported lazily (as in world.py) so the console can import this module whether or
not the demo app is installed; callers check ``apps.is_installed("agentops.demo")`` first.
"""
from __future__ import annotations

import uuid

from agentops.demo.models import WorldEffect
from runs.selectors import Page

PAGE_SIZE = 100


def _run_uuid(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def effect_list(*, run_id: str = "", exact: bool = False, before_id: int | None = None,
                limit: int = PAGE_SIZE, run_ids: list[str] | None = None) -> Page:
    """Return side effects newest first, of runs whose id is (or starts with) ``run_id``,
    and only of the runs in ``run_ids`` when given (a team member's runs)."""
    qs = WorldEffect.objects.all()
    if run_ids is not None:
        qs = qs.filter(run_id__in=run_ids)
    if run_id:
        qs = qs.filter(run_id=run_id) if exact else qs.filter(run_id__startswith=run_id)
    if before_id:
        qs = qs.filter(id__lt=before_id)
    rows = list(qs.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    for row in rows:
        # Effects outlive runs and some (the model outage counter) have no run: link only ids.
        row.run_uuid = _run_uuid(row.run_id)
    return Page(rows=rows, next_cursor=str(rows[-1].id) if more and rows else None)
