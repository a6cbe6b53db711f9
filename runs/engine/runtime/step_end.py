"""The end of a step's model turns: its answer completes it, or the model is told what it lacks.

A step whose declared completion (runs.engine.core.completion) is not met is asked again
until its turns run out; a count it stopped short of twice ends it with what it reached.
"""
from __future__ import annotations

from typing import Any

from runs.engine.core.completion import (Unmet, count_short_only, rejection_only, step_output,
                                         step_unmet)
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.outcomes import block
from runs.engine.runtime.session import RunSession
from runs.event_types import EventType


def turns_used(s: dict[str, Any], step: str) -> int:
    """Return the model turns ``step`` took since its last reset (an operator's retry)."""
    st = s["steps"].get(step, {})
    return st.get("turns", 0) - st.get("turn_base", 0)



def finish_step(session: RunSession, step: str, turn: int, text: str,
                usage: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Record the model's final answer of ``step``: complete it, or say what it still lacks."""
    s = session.state
    entry = next((p for p in s["plan"] if p["key"] == step), {})
    offered = entry.get("tools") or [t.name for t in session.agent.tools]
    unmet = step_unmet(s, step, text, offered)
    replied = NewEvent(EventType.MODEL_REPLIED, {"step": step, "turn": turn, "text": text,
                                         "usage": usage, "finish_reason": "stop", "calls": [],
                                         "no_progress": 0 if not unmet
                                         else s["guards"]["no_progress"], **(extra or {})})
    if unmet:
        _incomplete(session, step, turn, replied, unmet)
        return
    _step_done(session, step, text, [replied])


def _step_done(session: RunSession, step: str, text: str, events: list[NewEvent],
               short: list[dict[str, Any]] | None = None) -> None:
    """Complete ``step`` with its answer and facts (``short``: counts it did not reach)."""
    s = session.state
    facts = {}
    for t in s["turns"]:
        if t["step"] == step:
            for c in t["calls"]:
                if c["id"] in s["facts"]:
                    facts[c["id"]] = s["facts"][c["id"]]
    output: dict[str, Any] = {"text": text[:4000], "facts": facts}
    answer = step_output(s, step, text)
    if answer is not None:
        output["answer"] = answer
    if short:
        output["short"] = short
    session.commit([*events, NewEvent(EventType.STEP_COMPLETED, {"step": step, "output": output})],
                   milestone="step_complete")


def _incomplete(session: RunSession, step: str, turn: int, replied: NewEvent,
                unmet: Unmet) -> None:
    """Tell the model what the step still lacks and ask again; block once its turns are used."""
    s = session.state
    noted = NewEvent(EventType.STEP_INCOMPLETE, {"step": step, "turn": turn,
                                         "missing_fields": unmet.missing_fields,
                                         "reason": unmet.detail(step)})
    turns = turns_used(s, step) + 1  # since the step's last reset (an operator's retry)
    told = s["steps"].get(step, {}).get("missing") or []
    if count_short_only(unmet) and (any(f.startswith("count:") for f in told)
                                    or turns >= session.agent.max_turns_per_step):
        # Told once and stopped short again: it did part of its work; the run says so.
        _step_done(session, step, replied.data.get("text", ""), [replied, noted], unmet.short)
        return
    # A person's rejection will not change by asking the model again.
    if rejection_only(unmet) or turns >= session.agent.max_turns_per_step:
        block(session, "incomplete_step", unmet.detail(step), events=[replied, noted],
              tool=next(iter(unmet.rejected), ""))
        return
    session.commit([replied, noted,
                    NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": s["turn"] + 1})])
