"""The session's context memo (runs.engine.core.context) gives what a fresh build gives:
the same messages and the same size, as results and facts land on remembered turns."""
from __future__ import annotations

import json

from agentops.llm.protocol import messages_json
from runs.engine.core.context import KEEP_TURNS, context_build, context_tokens
from runs.engine.core.reducer import empty_state


def _state() -> dict:
    state = empty_state()
    state["run"] = {"goal": "g", "input": {"n": 1}}
    state["plan"] = [{"key": "s", "title": "S", "input": {}}]
    state["current_step"] = "s"
    for n in (1, 2):
        state["turns"].append({"n": n, "step": "s", "text": "", "calls": [
            {"id": f"tc_{n}", "name": "lookup", "args": {"item": n}, "result": None}]})
    return state


def test_a_result_landing_on_a_remembered_turn_shows_in_the_next_context(engine):
    agent = engine.make_agent("memo", {}, plan=["s"])
    state, memo = _state(), {}
    context_build(state, agent, memo)
    # The reducer replaces a call's result and adds its facts (tool.result).
    state["turns"][-1]["calls"][0]["result"] = {"status": "succeeded", "facts": {"price": 3},
                                                "summary": "found"}
    state["facts"]["tc_2"] = {"price": 3}
    remembered = context_build(state, agent, memo)
    fresh = context_build(state, agent)
    assert remembered == fresh
    assert messages_json(remembered) == json.dumps(fresh)  # the text a client sends
    tool = [json.loads(m["content"]) for m in remembered if m["role"] == "tool"]
    assert tool[-1]["facts"] == {"price": 3}
    assert context_tokens(remembered, memo) == context_tokens(fresh)
    state["facts"]["tc_2"] = {"price": 4}  # a person confirms other facts for the same call
    assert context_build(state, agent, memo) == context_build(state, agent)
    state["kept_out"] = {"tc_1": {"tool": "lookup", "summary": "big \u2028 \"ü\""}}
    state["summary"] = "earlier: \ud83d\ude00 said"
    state["recoveries"] = 1
    for _ in range(2):  # made, then said again from the memo
        remembered = context_build(state, agent, memo)
        assert remembered == context_build(state, agent)
        assert messages_json(remembered) == json.dumps(remembered)


def test_turns_leaving_and_entering_the_window_give_a_fresh_build(engine):
    agent = engine.make_agent("memo", {}, plan=["s"])
    state, memo = _state(), {}
    for n in range(3, 3 + 2 * KEEP_TURNS):
        turn = {"n": n, "step": "s", "text": f"t{n}", "calls": [
            {"id": f"tc_{n}", "name": "lookup", "args": {"item": n}, "result": None}]}
        state["turns"].append(turn)
        if n % 3:
            state["facts"][f"tc_{n}"] = {"n": n}
        if n % 5 == 0:  # a result lands on a turn already shown
            state["turns"][-3]["calls"][0]["result"] = {"status": "succeeded", "facts": {}}
        if n % 7 == 0:  # compacted: the oldest turns leave at once
            del state["turns"][:4]
        remembered = context_build(state, agent, memo)
        assert remembered == context_build(state, agent)
        assert messages_json(remembered) == json.dumps(remembered)
        assert context_tokens(remembered, memo) == context_tokens(context_build(state, agent))
