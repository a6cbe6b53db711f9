"""Attention runs grouped by failure signature, so one decision can be applied to all."""
from __future__ import annotations

from typing import Any


def recommend_groups(*, queryset: Any = None, limit: int = 50) -> list[dict[str, Any]]:
    """Return attention runs grouped by failure signature, largest group first."""
    from django.db.models import Count, Max

    from runs.models import Run
    from runs.statuses import ATTENTION

    qs = queryset if queryset is not None else Run.objects.filter(status__in=list(ATTENTION))
    rows = (qs.exclude(attention_signature="")
            .values("attention_signature", "agent_name", "current_step", "attention_reason",
                    "recommended_action", "recommendation_why")
            .annotate(count=Count("id"), last=Max("updated_at")).order_by("-count", "-last"))
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(row["attention_signature"], {**row, "count": 0})
        group["count"] += row["count"]
    return list(groups.values())[:limit]
