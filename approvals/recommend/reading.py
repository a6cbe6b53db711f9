"""Read a Situation's inputs from the run's state, its ledger, its events and the audit log.

Each reader is one small query; they run when a run stops (rare), never per unit of work.
"""
from __future__ import annotations

from typing import Any

from agentops.agents import registry
from agentops.jsonstate import canonical_json
from approvals.models import Intervention
from approvals.recommend.classes import failure_class
from approvals.recommend.situation import Evidence, Situation
from ledger.models import ToolCall
from runs.errors import UnknownAgent
from runs.models.event import run_events

_OK = ("succeeded", "confirmed_executed")
_DONE_STEP = ("succeeded", "skipped")
_HISTORY_LIMIT = 200


def tool_specs(run: Any) -> dict[str, Any]:
    """Return the tools of the run's pinned agent version (or of the deployed one, if gone)."""
    for version in (run.agent_version, None):
        try:
            return {t.name: t for t in registry.get(run.agent_name, version).tools}
        except UnknownAgent:
            continue
    return {}


def progress(run: Any, state: dict[str, Any]) -> tuple[int, int]:
    """Return (steps done, steps planned) from the state, or the run's projection without one."""
    steps = {k: v for k, v in (state.get("steps") or {}).items() if k != "_plan"}
    if steps:
        return sum(1 for s in steps.values() if s.get("status") in _DONE_STEP), len(steps)
    return int(run.steps_done or 0), int(run.steps_total or 0)


def ledger_call(run: Any, tool_call_id: str) -> Any:
    """Return the ledger row of the failing call, or None."""
    if not tool_call_id or run.pk is None:
        return None
    return ToolCall.objects.filter(run=run, tool_call_id=tool_call_id).first()


def call_effect(call: Any) -> str:
    """Return the effect class of a ledger row."""
    return call.effect_class


def _writes(run: Any) -> Any:
    return ToolCall.objects.filter(run=run, effect="write", status__in=_OK)


def compensable_done(run: Any, specs: dict[str, Any]) -> int:
    """Count writes made so far that a rollback could undo (the tool declares compensate)."""
    undoable = [n for n, s in specs.items() if s.is_write and s.compensate is not None]
    return _writes(run).filter(tool__in=undoable).count() if undoable and run.pk else 0


def standing_writes(run: Any, specs: dict[str, Any]) -> tuple[str, ...]:
    """Return the tools whose writes so far nothing can undo (no compensation)."""
    if run.pk is None:
        return ()
    undoable = {n for n, s in specs.items() if s.is_write and s.compensate is not None}
    tools = set(_writes(run).values_list("tool", flat=True)) - undoable
    return tuple(sorted(tools))


def step_writes_done(run: Any, step: str) -> tuple[str, ...]:
    """Return the tools whose writes succeeded in ``step`` (a skip forgets their facts)."""
    if not step or run.pk is None:
        return ()
    return tuple(sorted(set(_writes(run).filter(step_key=step).values_list("tool", flat=True))))


def steps_ahead(state: dict[str, Any], step: str) -> list[str]:
    """Return the plan steps not done yet, after ``step``, in plan order."""
    keys = [s["key"] for s in state.get("plan") or []]
    steps = state.get("steps") or {}
    start = keys.index(step) + 1 if step in keys else 0
    return [k for k in keys[start:] if (steps.get(k) or {}).get("status") not in _DONE_STEP]


def writes_ahead(run: Any, state: dict[str, Any], step: str,
                 specs: dict[str, Any]) -> tuple[str, ...]:
    """Return "step: tool (effect)" for writes the next steps are known to make.

    Known from the ledger: what earlier runs of this agent (and this run, before a rollback)
    wrote in those steps. A step no run has reached yet contributes nothing.
    """

    ahead = steps_ahead(state, step)
    if not ahead:
        return ()
    rows = (ToolCall.objects.filter(run__agent_name=run.agent_name, step_key__in=ahead,
                                    effect="write")
            .order_by().values_list("step_key", "tool").distinct()[:_HISTORY_LIMIT])
    seen = {(k, t) for k, t in rows}
    return tuple(f"{k}: {t} ({specs[t].effect_class if t in specs else 'write'})"
                 for k in ahead for t in sorted(t for s, t in seen if s == k))


def operator_retries(run: Any, step: str) -> int:
    """Return how many times a person already retried ``step`` of this run."""
    if run.pk is None:
        return 0
    rows = Intervention.objects.filter(run=run, action="run.retry").values_list("data", flat=True)
    return sum(1 for d in rows if (d or {}).get("step") == step)


def deployed_version(run: Any) -> str:
    """Return the deployed version of the run's agent when it differs from the pinned one."""
    try:
        version = registry.get(run.agent_name).version
    except UnknownAgent:
        return ""
    return "" if version == run.agent_version or not registry.has(run.agent_name, version) \
        else version


def evidence(run: Any, call: Any, spec: Any, hint: dict[str, Any] | None = None) -> Evidence:
    """Return what is known about the ambiguous call: probe, timing, and the tool's history.

    ``hint`` carries what the engine knows but has not committed yet (the attempt that just
    ended: ``cause``, ``elapsed_ms``, ``probe``); it wins over the ledger.
    """

    if call is None:
        return Evidence()
    last = call.attempt_rows.order_by("-attempt").first()
    marker = (run_events(run).filter(tool_call_id=call.tool_call_id, type="tool.unknown")
              .order_by("-seq").values_list("data", flat=True).first()) or {}
    hint = hint or {}
    probe = hint.get("probe") or marker.get("probe") or (
        "unreachable" if call.probeable else "none")
    confirms = (Intervention.objects.filter(run__agent_name=run.agent_name,
                                            action__in=("run.confirm_executed",
                                                        "run.confirm_not_executed"))
                .order_by("-at").values_list("action", "data")[:_HISTORY_LIMIT])
    same_tool = [(a, d or {}) for a, d in confirms if (d or {}).get("tool") == call.tool]
    return Evidence(
        probe=probe,
        cause=hint.get("cause") or marker.get("category") or (last.error_class if last else ""),
        elapsed_ms=hint.get("elapsed_ms", last.duration_ms if last else None),
        timeout_s=getattr(spec, "timeout", None),
        executed_before=sum(1 for a, d in same_tool if a == "run.confirm_executed"
                            and d.get("tool_call") != call.tool_call_id),
        not_executed_before=sum(1 for a, d in same_tool if a == "run.confirm_not_executed"
                                and d.get("tool_call") != call.tool_call_id),
        reconfirmed=sum(1 for a, d in same_tool if a == "run.confirm_not_executed"
                        and d.get("tool_call") == call.tool_call_id),
        differs=differs_read(hint.get("differs") or marker.get("differs") or []),
    )


def contradiction_read(*, run: Any) -> dict[str, Any] | None:
    """Return the asked-vs-found of an ``unknown`` run whose probe found something else."""
    if getattr(run, "status", "") != "unknown" or not run.current_tool_call or run.pk is None:
        return None
    data = (run_events(run).filter(tool_call_id=run.current_tool_call,
                                 type="tool.unknown").order_by("-seq")
            .values_list("data", flat=True).first()) or {}
    if data.get("probe") != "different":
        return None
    call = ledger_call(run, run.current_tool_call)
    return {"tool": call.tool if call else "", "tool_call_id": run.current_tool_call,
            "rows": differs_read(data.get("differs") or []),
            "found_summary": str(data.get("found_summary") or "")}


def differs_read(differs: list[dict[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """Return a contradicting probe's (argument, asked, found) as text, from its event data."""
    return tuple((str(d.get("argument", "")), _text(d.get("asked")), _text(d.get("found")))
                 for d in differs if isinstance(d, dict))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def situation_read(*, run: Any, state: dict[str, Any], category: str, tool: str = "",
                   tool_call_id: str = "", hint: dict[str, Any] | None = None) -> Situation:
    """Return the Situation of ``run`` stopped by ``category`` (state: its current state)."""
    specs = tool_specs(run)
    step = state.get("current_step") or ""
    done, total = progress(run, state)
    spec = specs.get(tool) if tool else None
    call = ledger_call(run, tool_call_id)
    effect = spec.effect_class if spec is not None else (call_effect(call) if call else "")
    wait = run.wait_data or {} if getattr(run, "wait_kind", "") == "timer" else {}
    return Situation(
        failure=failure_class(category), status=run.status, tool=tool, effect=effect,
        done=done, total=total, compensable_done=compensable_done(run, specs),
        standing_writes=standing_writes(run, specs),
        step_writes_done=step_writes_done(run, step),
        writes_ahead=writes_ahead(run, state, step, specs),
        operator_retries=operator_retries(run, step),
        deployed_version=deployed_version(run) if category == "version_mismatch" else "",
        evidence=(evidence(run, call, spec, hint) if category == "ambiguous_write"
                  else Evidence()),
        wait_until=getattr(run, "wait_until", None) if wait else None,
        wait_reason=str(wait.get("reason", "")) if wait else "",
    )
