"""reduce(state, event): the only code that knows how an event changes a run's state.

Pure: no I/O, no clock, no randomness. ``fold`` applies many events after copying once, which
is what loading and replaying use; ``reduce`` is the one-event form for tests and callers
that must not share structure.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from runs.engine.core import restores, world
from runs.engine.core.outcome_state import exception_note, kept_out_note, step_outcome
from runs.event_types import EventType

State = dict[str, Any]
Event = dict[str, Any]
_RESULT_KEYS = ("status", "summary", "facts", "missing_fields", "error", "deduplicated", "same_as")
_HANDLERS: dict[str, Callable[[State, dict[str, Any], Event], None]] = {}


def empty_state() -> State:
    """Return the state of a run before its first event."""
    return {
        "run": {},
        "status": "queued",
        "seq": 0,
        "plan_version": 0,
        "plan": [],
        "steps": {},
        "current_step": None,
        "turn": 0,
        "turns": [],
        "summary": "",
        "compacted_turns": 0,
        "facts": {},
        "open_calls": {},
        "usage": {"tokens": 0, "model_calls": 0, "tool_calls": 0, "cost_micros": 0},
        "wait": None,
        "recoveries": 0,
        "signals": [],
        "guards": {"no_progress": 0, "recent_calls": []},
        "notes": [],
        "exceptions": [],
    }


def reduce(state: State, event: Event) -> State:
    """Return the state after ``event``, leaving ``state`` untouched."""
    return fold(state, [event])


def fold(state: State, events: Iterable[Event]) -> State:
    """Return the state after all ``events`` in order, leaving ``state`` untouched."""
    new = copy.deepcopy(state)
    for event in events:
        apply(new, event)
    return new


def apply(state: State, event: Event) -> None:
    """Apply ``event`` to ``state`` in place (callers own the copy)."""
    handler = _HANDLERS.get(event["type"])
    if handler is not None:
        handler(state, event.get("data") or {}, event)
    state["seq"] = event["seq"]


def _on(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        _HANDLERS[name] = fn
        return fn

    return register


def _step(state: State, key: str) -> dict[str, Any]:
    return state["steps"].setdefault(
        key, {"status": "pending", "retries": 0, "output": None, "error_class": ""}
    )


@_on(EventType.RUN_CREATED)
def _created(state: State, d: dict[str, Any], e: Event) -> None:
    state["run"] = {
        "agent": d["agent"],
        "version": d["version"],
        "goal": d["goal"],
        "input": d.get("input", {}),
        "constraints": d.get("constraints", []),
        "parent": d.get("parent"),
    }
    if d.get("plan"):
        _plan(state, {"plan_version": 1, "steps": d["plan"]}, e)


@_on(EventType.RUN_STATUS)
def _status(state: State, d: dict[str, Any], e: Event) -> None:
    # The plain text (a RunStatus member is a str subclass): the state then is plain JSON,
    # which a snapshot's check (jsonstate.json_plain) passes in one walk instead of two.
    state["status"] = str(d["to"])
    if d["to"] != "waiting":
        state["wait"] = None


@_on(EventType.RUN_RECOVERED)
def _recovered(state: State, d: dict[str, Any], e: Event) -> None:
    state["recoveries"] = d.get("recoveries", state["recoveries"] + 1)
    world.recheck_mark(state, e, "recovery")


@_on(EventType.PLAN_ACCEPTED)
def _plan(state: State, d: dict[str, Any], e: Event) -> None:
    state["plan_version"] = d["plan_version"]
    state["plan"] = [
        {
            "key": s["key"],
            "title": s.get("title", s["key"]),
            "depends_on": list(s.get("depends_on", [])),
            "input": s.get("input", {}),
            **({"completion": s["completion"]} if s.get("completion") else {}),
            # the tools the step offers (StepSpec.tools); absent means all of them
            **({"tools": list(s["tools"])} if s.get("tools") else {}),
        }
        for s in d["steps"]
    ]
    state["steps"].pop("_plan", None)
    if state["current_step"] == "_plan":
        state["current_step"] = None
    for s in state["plan"]:
        _step(state, s["key"])


@_on(EventType.PLAN_EDITED)
def _plan_edited(state: State, d: dict[str, Any], e: Event) -> None:
    # A person's edit: the steps not done yet, in their new order (done ones keep theirs).
    state["plan_version"] = d["plan_version"]
    state["plan"] = [dict(s, depends_on=list(s.get("depends_on", []))) for s in d["steps"]]
    for key in d.get("removed", []):
        state["steps"].pop(key, None)
    for s in state["plan"]:
        _step(state, s["key"])
    # The engine picks the next step in the new order; no edited step is running.
    state["current_step"] = None


@_on(EventType.STEP_STARTED)
def _step_started(state: State, d: dict[str, Any], e: Event) -> None:
    _step(state, d["step"])["status"] = "running"
    state["current_step"] = d["step"]


@_on(EventType.STEP_COMPLETED)
def _step_completed(state: State, d: dict[str, Any], e: Event) -> None:
    step = _step(state, d["step"])
    step.update(status="succeeded", output=d.get("output"), error_class="")
    step.pop("missing", None)
    for short in (d.get("output") or {}).get("short", []):
        # It ended short of a count it declared: done, but not all of it.
        exception_note(state, e, "count_short", step=d["step"], by="", **short)
    state["guards"] = {"no_progress": 0, "recent_calls": []}
    if state["current_step"] == d["step"]:
        state["current_step"] = None


@_on(EventType.STEP_FAILED)
def _step_failed(state: State, d: dict[str, Any], e: Event) -> None:
    step = _step(state, d["step"])
    step.update(status=d.get("status", "failed"), error_class=d.get("error_class", ""))
    step["retries"] = d.get("retries", step["retries"])


@_on(EventType.STEP_RETRYING)
def _step_retrying(state: State, d: dict[str, Any], e: Event) -> None:
    step = _step(state, d["step"])
    step["retries"] = d["retries"]
    step["error_class"] = d.get("error_class", "")
    state["failures"] = state.get("failures", 0) + 1  # the run's failure budget (budgets.py)


_on(EventType.TOOL_ATTEMPT_FAILED)(lambda state, d, e: state.update(
    failures=state.get("failures", 0) + 1))


@_on(EventType.STEP_SKIPPED)
def _step_skipped(state: State, d: dict[str, Any], e: Event) -> None:
    step = _step(state, d["step"])
    step.update(status="skipped", output=d.get("output"), error_class="")
    step.pop("missing", None)
    if state["current_step"] == d["step"]:
        state["current_step"] = None
    exception_note(state, e, "step_skipped", step=d["step"], by=d.get("by", ""),
               why=d.get("reason", ""))
    if (d.get("output") or {}).get("facts"):
        # Facts an operator supplies for a skipped step are confirmed facts for later steps.
        state["facts"][f"skip:{d['step']}"] = d["output"]["facts"]
        exception_note(state, e, "operator_output", step=d["step"], by=d.get("by", ""),
                   why=f"facts supplied for skipped step {d['step']}: "
                       f"{', '.join(sorted(d['output']['facts']))}")


@_on(EventType.STEP_RESET)
def _step_reset(state: State, d: dict[str, Any], e: Event) -> None:
    step = _step(state, d["step"])
    step.update(status="pending", retries=0, error_class="", output=None)
    # Agent.max_turns_per_step counts the turns since the step was last reset (a retry).
    step["turn_base"] = step.get("turns", 0)
    step.pop("missing", None)
    step.pop("refused", None)  # a retried step starts over: its old refusals are moot
    state["failure_base"] = state.get("failures", 0)  # a person's retry: a fresh allowance
    state["guards"] = {"no_progress": 0, "recent_calls": []}


@_on(EventType.MODEL_REQUESTED)
def _model_requested(state: State, d: dict[str, Any], e: Event) -> None:
    state["turn"] = d["turn"]


@_on(EventType.MODEL_REPLIED)
def _model_replied(state: State, d: dict[str, Any], e: Event) -> None:
    usage = d.get("usage") or {}
    totals = state["usage"]
    totals["tokens"] += usage.get("tokens", 0)
    totals["cost_micros"] += usage.get("cost_micros", 0)
    totals["model_calls"] += 1
    calls = [
        {"id": c["id"], "name": c["name"], "args": c.get("args"), "result": None}
        for c in d.get("calls", [])
    ]
    state["turns"].append(
        {"n": d["turn"], "step": d["step"], "text": d.get("text", ""), "calls": calls}
    )
    step = _step(state, d["step"])
    step["turns"] = step.get("turns", 0) + 1
    for c in calls:
        state["open_calls"][c["id"]] = {"turn": d["turn"], "name": c["name"], "step": d["step"]}
        if "span_id" in d:  # the model call's span (tracing on): its tool calls' parent
            state["open_calls"][c["id"]]["span"] = [d["trace_id"], d["span_id"]]
    guards = state["guards"]
    guards["recent_calls"] = (guards["recent_calls"] + d.get("call_hashes", []))[-20:]
    guards["no_progress"] = d.get("no_progress", guards["no_progress"])


@_on(EventType.MODEL_FAILED)
def _model_failed(state: State, d: dict[str, Any], e: Event) -> None:
    state["usage"]["tokens"] += (d.get("usage") or {}).get("tokens", 0)


@_on(EventType.TOOL_RESULT)
def _tool_result(state: State, d: dict[str, Any], e: Event) -> None:
    call_id = d["id"]
    result = {k: d[k] for k in _RESULT_KEYS if k in d}
    if d.get("artifact"):
        result["artifact"] = d["artifact"]
    opened = state["open_calls"].pop(call_id, None)
    if opened is not None:
        state["usage"]["tool_calls"] += 1
        step_outcome(state, e, opened, d)
    for turn in reversed(state["turns"]):
        for call in turn["calls"]:
            if call["id"] == call_id:
                call["result"] = result
                break
        else:
            continue
        break
    fresh = not d.get("deduplicated")
    if fresh and d.get("status") in ("succeeded", "confirmed_executed") and d.get("facts") is not None:
        state["facts"][call_id] = d["facts"]
    if d.get("artifact") and opened is not None and d.get("status") == "succeeded":
        kept_out_note(state, call_id, opened["name"], d.get("summary") or "")


@_on(EventType.STEP_INCOMPLETE)
def _step_incomplete(state: State, d: dict[str, Any], e: Event) -> None:
    # The model stopped before the step's declared completion: it is asked again, told this.
    _step(state, d["step"])["missing"] = d["missing_fields"]


@_on(EventType.TOOL_COMPENSATED)
def _tool_compensated(state: State, d: dict[str, Any], e: Event) -> None:
    exception_note(state, e, "compensated", tool=d.get("tool", ""), tool_call_id=d["id"],
               by=d.get("by", ""), why="undone by its compensation (rollback)")


@_on(EventType.RUN_FINISHED_PARTIAL)
def _finished_partial(state: State, d: dict[str, Any], e: Event) -> None:
    exception_note(state, e, "finished_partial", by=d.get("by", ""), why=d.get("reason", ""),
               steps=d.get("not_done", []))


@_on(EventType.TOOL_UNKNOWN)
def _tool_unknown(state: State, d: dict[str, Any], e: Event) -> None:
    call = state["open_calls"].get(d["id"])
    if call is not None:
        call["unknown"] = True


@_on(EventType.CHILDREN_ENDED)
def _children_ended(state: State, d: dict[str, Any], e: Event) -> None:
    # A child that did not do all its work keeps its parent from a clean success.
    for child in d.get("children", []):
        exception_note(state, e, "child_exceptions", child=child["id"],
                       agent=child.get("agent", ""), outcome=child.get("status", ""),
                       by="", why="; ".join(child.get("what", []))[:500])


@_on(EventType.WAIT_STARTED)
def _wait_started(state: State, d: dict[str, Any], e: Event) -> None:
    state["wait"] = {"kind": d["kind"], "until": d.get("until"), "data": d.get("data", {})}


@_on(EventType.WAIT_ENDED)
def _wait_ended(state: State, d: dict[str, Any], e: Event) -> None:
    state["wait"] = None
    world.recheck_mark(state, e, "wait", d.get("waited_s", 0))


@_on(EventType.SIGNAL_RECEIVED)
def _signal(state: State, d: dict[str, Any], e: Event) -> None:
    state["signals"].append({"name": d["name"], "payload": d.get("payload", {}), "seq": e["seq"]})


@_on(EventType.CONTEXT_COMPACTED)
def _compacted(state: State, d: dict[str, Any], e: Event) -> None:
    upto = d["upto_turn"]
    kept = [t for t in state["turns"] if t["n"] > upto]
    state["compacted_turns"] += len(state["turns"]) - len(kept)
    state["turns"] = kept
    state["summary"] = d["summary"]


@_on(EventType.RUN_NOTE)
def _note(state: State, d: dict[str, Any], e: Event) -> None:
    state["notes"] = (state["notes"] + [d["text"]])[-10:]


@_on(EventType.TOOL_REOPENED)
def _tool_reopened(state: State, d: dict[str, Any], e: Event) -> None:
    # An operator's retry puts a settled call back on the step's to-do list.
    state["open_calls"][d["id"]] = {"turn": d["turn"], "name": d["name"], "step": d["step"]}
    for turn in state["turns"]:
        for call in turn["calls"]:
            if call["id"] == d["id"]:
                call["result"] = None


@_on(EventType.TOOL_CONFIRMED)
def _tool_confirmed(state: State, d: dict[str, Any], e: Event) -> None:
    call = state["open_calls"].get(d["id"])
    if call is not None and not d.get("executed"):
        call.pop("unknown", None)
    if not d.get("executed"):
        exception_note(state, e, "confirmed_not_executed", tool_call_id=d["id"],
                   by=d.get("by", ""), why=d.get("evidence", "") or "confirmed not executed")
    elif d.get("facts"):
        exception_note(state, e, "operator_output", tool_call_id=d["id"], by=d.get("by", ""),
                   why="outcome facts supplied by a person: " + ", ".join(sorted(d["facts"])))


@_on(EventType.APPROVAL_DECIDED)
def _approval_decided(state: State, d: dict[str, Any], e: Event) -> None:
    # Edited arguments replace the proposal in the model's view: it sees what will run.
    if d.get("args") is None:
        return
    for turn in reversed(state["turns"]):
        for call in turn["calls"]:
            if call["id"] == d["tool_call_id"]:
                call["args"] = d["args"]
                return


_HANDLERS.update(world.HANDLERS)  # resource versions and the re-check after a wait
_HANDLERS.update(restores.HANDLERS)  # rollbacks, imports, migrations, usage spent outside
