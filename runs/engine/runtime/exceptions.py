"""The exceptions a run ends with: what kept it from a clean success, who, when and why.

The reducer records them as the events happen (a skipped step, a rejected approval, a
compensated write, a call confirmed "did not execute", facts a person supplied, a rollback,
an operator finishing with partial results); the ledger adds calls whose outcome nobody
ever confirmed. Each item is dated by the event that caused it.
"""
from __future__ import annotations

from typing import Any

from django.db import connection

from ledger.models import ToolCall
from runs.engine.core.outcome_state import refusals_open
from ledger.statuses import ToolCallStatus
from runs.engine.runtime.prepared import prepared_rows
from runs.models.event import run_events

_WHAT = {
    "step_skipped": "step {step} was skipped; its work was not done",
    "operator_output": "a person supplied output{for_}",
    "approval_rejected": "{tool} was rejected{for_}",
    "approval_expired": "the approval of {tool} expired and was denied{for_}",
    "compensated": "{tool} ({tool_call_id}) was undone by its compensation",
    "rolled_back": "the run was rolled back",
    "confirmed_not_executed": "{tool_call_id} was confirmed as not executed",
    "unknown_call": "{tool} ({tool_call_id}) may or may not have happened; nobody confirmed it",
    "finished_partial": "an operator finished the run with partial results{not_done}",
    "cancelled": "the run was cancelled",
    "refused_call": "{tool} ({tool_call_id}) was refused{for_} and never made",
    "child_exceptions": "child run {child_short} ({agent}) ended {outcome_words}",
    "count_short": "step {step} reached {got} of {need} {key}{missing_}",
}


def exception_what(item: dict[str, Any]) -> str:
    """Return the one-line "what" of an exception item."""
    fields = {"step": "", "tool": "a call", "tool_call_id": "", **item}
    fields["for_"] = f" in step {item['step']}" if item.get("step") else ""
    # The finish-partial report names every step left undone, not just that some were.
    steps = item.get("steps") or []
    fields["not_done"] = f"; not done: {', '.join(steps)}" if steps else "; every step was done"
    fields["child_short"] = str(item.get("child", ""))[:8]
    fields["outcome_words"] = str(item.get("outcome", "")).replace("_", " ")
    missing, n = item.get("missing") or [], item.get("missing_count", 0)
    fields["missing_"] = (f"; missing: {', '.join(missing)}"
                          + (f" and {n - len(missing)} more" if n > len(missing) else "")
                          if missing else "")
    return _WHAT.get(item["kind"], item["kind"]).format(**fields)


def exceptions_resolve(run_id: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``items`` with what/who/when filled in (when = the time of the event's seq)."""
    seqs = {i["seq"] for i in items if i.get("seq")}
    at = dict(run_events(run_id).filter(seq__in=seqs).values_list("seq", "at")) \
        if seqs else {}
    out = []
    for item in items:
        when = item.get("when") or (at[item["seq"]].isoformat() if item.get("seq") in at else "")
        out.append({**item, "what": exception_what(item), "who": item.get("by") or "system",
                    "when": when, "why": item.get("why", "")})
    return out


def unknown_calls(run_id: Any) -> list[dict[str, Any]]:
    """Return an exception item per call of the run whose outcome is still unknown."""
    # Ordered by turn and index alone: the model's default order starts with the run's own
    # (its updated_at), one value here, and would join the run table at every run's end.
    if connection.vendor == "postgresql":  # at every run's end: prepared (runtime.prepared)
        rows: Any = prepared_rows(_UNKNOWN_SQL, [run_id])
    else:
        rows = (ToolCall.objects.filter(run_id=run_id, status__in=_NOT_SETTLED)
                .order_by("turn", "index")
                .values_list("tool", "tool_call_id", "step_key", "updated_at", "error"))
    return [{"kind": "unknown_call", "tool": tool, "tool_call_id": call_id, "step": step,
             "by": "", "when": updated_at.isoformat(),
             "why": error or "its outcome was never confirmed"}
            for tool, call_id, step, updated_at, error in rows]


_NOT_SETTLED = (ToolCallStatus.UNKNOWN, ToolCallStatus.RUNNING)
_UNKNOWN_SQL = (f"SELECT tool, tool_call_id, step_key, updated_at, error FROM "
                f"{ToolCall._meta.db_table} WHERE run_id = %s AND status IN "
                f"({', '.join(repr(str(s)) for s in _NOT_SETTLED)}) ORDER BY turn, \"index\"")


def run_exceptions_at_end(run_id: Any, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return every exception the run ends with (empty: a clean success)."""
    return exceptions_resolve(run_id, [*state.get("exceptions", []), *refusals_open(state),
                                       *unknown_calls(run_id)])
