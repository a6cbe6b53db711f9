"""A run's trace as the console draws it: steps, model calls and tool attempts on one time axis.

Read from what the run stored (Step rows, model events, ToolAttempt rows, recoveries), so it
works with OpenTelemetry export on or off: the ids it shows are the spans' when it was on.
Each model call carries its request and reply for the console to open: the reply from its
``model.replied`` event, the prompt when content capture was on (a bounded preview in the
event, the whole prompt an artifact opened by its id). Everything here was redacted before
it was stored.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ledger.models import ToolAttempt
from runs.event_types import EventType
from runs.models import Run, Step
from runs.models.event import run_events

AXIS = 1000  # the waterfall's width in SVG user units
MAX_CALLS = 400
_MODEL = (EventType.MODEL_REPLIED, EventType.MODEL_FAILED)


@dataclass
class TraceRow:
    """One line of the waterfall: a step, a model call, a tool attempt or a recovery gap."""

    kind: str
    label: str
    start: dt.datetime
    end: dt.datetime
    status: str = ""
    depth: int = 0
    key: str = ""
    tokens: int | None = None
    cost_micros: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    x: float = 0.0
    w: float = 0.0

    @property
    def seconds(self) -> float:
        """Return the row's duration in seconds."""
        return max((self.end - self.start).total_seconds(), 0.0)


def _model_rows(events: list[dict[str, Any]]) -> dict[tuple[str, int], list[TraceRow]]:
    """Return the model calls by (step, turn), from their reply or failure events."""
    out: dict[tuple[str, int], list[TraceRow]] = {}
    for e in events:
        d = e["data"]
        if e["type"] not in _MODEL or "step" not in d:
            continue
        usage = d.get("usage") or {}
        failed = e["type"] == EventType.MODEL_FAILED
        start = e["at"] - dt.timedelta(milliseconds=d.get("ms") or 0)
        row = TraceRow(kind="model", label=f"model call · turn {d.get('turn', '?')}",
                       start=start, end=e["at"], depth=1, key=f"m{e['seq']}",
                       status=d.get("category", "failed") if failed else
                       d.get("finish_reason") or "stop",
                       tokens=usage.get("tokens"), cost_micros=usage.get("cost_micros"),
                       detail={"text": d.get("text") or d.get("message") or "",
                               "calls": d.get("calls") or [], "prompt": d.get("prompt"),
                               "span_id": d.get("span_id", ""), "trace_id": d.get("trace_id", ""),
                               "failed": failed})
        out.setdefault((d["step"], d.get("turn", 0)), []).append(row)
    return out


def _tool_rows(run_id: Any, now: dt.datetime) -> dict[tuple[str, int], list[TraceRow]]:
    """Return each tool attempt by the (step, turn) of the model call that asked for it."""
    attempts = (ToolAttempt.objects.filter(tool_call__run_id=run_id)
                .select_related("tool_call").order_by("started_at", "attempt")[:MAX_CALLS])
    out: dict[tuple[str, int], list[TraceRow]] = {}
    for a in attempts:
        call = a.tool_call
        label = f"{call.tool} · attempt {a.attempt}" + (" (retry)" if a.attempt > 1 else "")
        row = TraceRow(kind="tool", label=label, start=a.started_at,
                       end=a.finished_at or now, depth=2, status=a.status,
                       key=f"t{a.pk}", detail={"tool_call_id": call.tool_call_id,
                                               "attempt": a.attempt, "error": a.error_class,
                                               "effect": call.effect_class,
                                               "open": a.finished_at is None})
        out.setdefault((call.step_key, call.turn), []).append(row)
    return out


def _gap_rows(run: Run, events: list[dict[str, Any]]) -> list[TraceRow]:
    """Return each recovery: from the lost worker's last event to the run's next claim."""
    rows = []
    for e in events:
        if e["type"] != EventType.RUN_RECOVERED:
            continue
        near = run_events(run).filter(seq__in=(e["seq"] - 1, e["seq"] + 2))
        at = dict(near.values_list("seq", "at"))
        start, end = at.get(e["seq"] - 1, e["at"]), at.get(e["seq"] + 2, e["at"])
        rows.append(TraceRow(kind="gap", label=f"worker lost · recovery {e['data'].get('recoveries')}",
                             start=start, end=end, status="recovered", key=f"g{e['seq']}",
                             detail={"owner": e["data"].get("lost_owner", ""),
                                     "cause": e["data"].get("cause", "")}))
    return rows


def _ordered(steps: list[Step], models: dict, tools: dict, gaps: list[TraceRow],
             now: dt.datetime) -> list[TraceRow]:
    """Return the rows in reading order: each step, its model calls, each call's tool attempts."""
    rows: list[TraceRow] = []
    for step in steps:
        turns = sorted({t for (s, t) in [*models, *tools] if s == step.key})
        if step.started_at is None and not turns:
            continue
        start = step.started_at or now
        rows.append(TraceRow(kind="step", label=step.title or step.key, start=start,
                             end=step.finished_at or now, status=step.status, key=f"s{step.pk}",
                             detail={"retries": step.retry_count, "open": not step.finished_at}))
        for turn in turns:
            rows.extend(models.get((step.key, turn), []))
            rows.extend(tools.get((step.key, turn), []))
    for gap in gaps:
        after = next((i for i, r in enumerate(rows) if r.start > gap.start), len(rows))
        rows.insert(after, gap)
    return rows


def _placed(rows: list[TraceRow]) -> dict[str, Any]:
    if not rows:
        return {"rows": [], "span_s": 0.0, "t0": None}
    t0 = min(r.start for r in rows)
    span = max(max(r.end for r in rows) - t0, dt.timedelta(milliseconds=1)).total_seconds()
    for r in rows:
        r.x = round((r.start - t0).total_seconds() / span * AXIS, 1)
        r.w = round(max(r.seconds / span * AXIS, 1.5), 1)
        r.detail["offset_s"] = (r.start - t0).total_seconds()
    return {"rows": rows, "span_s": span, "t0": t0}


def run_trace(run: Run, *, now: dt.datetime) -> dict[str, Any]:
    """Return the run's waterfall: rows placed on one axis, totals, and whether it was cut."""
    events = list(run_events(run).filter(type__in=[*_MODEL, EventType.RUN_RECOVERED])
                  .order_by("seq").values("seq", "type", "data", "at")[:MAX_CALLS])
    models, tools = _model_rows(events), _tool_rows(run.pk, now)
    steps = list(Step.objects.filter(run_id=run.pk).order_by("position"))
    rows = _ordered(steps, models, tools, _gap_rows(run, events), now)
    placed = _placed(rows)
    calls = [r for r in rows if r.kind in ("model", "tool")]
    placed.update(
        calls=len(calls), cut=len(events) >= MAX_CALLS,
        tokens=sum(r.tokens or 0 for r in calls), cost_micros=sum(r.cost_micros or 0 for r in calls),
        retries=sum(1 for r in calls if r.kind == "tool" and r.detail["attempt"] > 1),
        recoveries=sum(1 for r in rows if r.kind == "gap"), axis=AXIS,
        ticks=[{"x": AXIS * i / 4, "label": placed["span_s"] * i / 4} for i in range(5)])
    return placed
