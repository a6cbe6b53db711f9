"""Geometry of the step timeline drawn as inline SVG (bars placed by time, labelled)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from agentops import clock

WIDTH, ROW, LABEL = 1200, 22, 170


@dataclass
class Bar:
    """One step drawn as a bar: position, size, text and a CSS class for its status."""

    y: int
    x: float
    w: float
    label: str
    status: str
    retries: int
    duration: str
    text_y: int


def human_seconds(seconds: float) -> str:
    """Return a duration as people read it (840 ms, 4.2 s, 12 min, 3.1 h)."""
    if seconds < 1:
        return f"{int(seconds * 1000)} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def timeline(steps: list[Any], *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Return the bars and the SVG height for ``steps`` (unstarted steps get no bar)."""
    now = now or clock.now()
    started = [s.started_at for s in steps if s.started_at]
    if not steps:
        return {"bars": [], "height": 0, "width": WIDTH, "span": ""}
    t0 = min(started) if started else now
    t1 = max([s.finished_at or now for s in steps if s.started_at] or [now])
    span = max((t1 - t0).total_seconds(), 0.001)
    scale = (WIDTH - LABEL - 70) / span
    bars = []
    for i, step in enumerate(steps):
        y = i * ROW + 4
        if step.started_at:
            end = step.finished_at or now
            x = LABEL + (step.started_at - t0).total_seconds() * scale
            w = max((end - step.started_at).total_seconds() * scale, 2)
            dur = human_seconds((end - step.started_at).total_seconds())
        else:
            x, w, dur = LABEL, 0, "not started"
        bars.append(Bar(y=y, x=round(x, 1), w=round(w, 1), label=(step.title or step.key)[:26],
                        status=step.status, retries=step.retry_count, duration=dur,
                        text_y=y + 12))
    return {"bars": bars, "height": len(steps) * ROW + 8, "width": WIDTH, "span": human_seconds(span),
            "label_x": LABEL - 8}
