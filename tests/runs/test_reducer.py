"""reduce is pure, and replaying a whole log equals snapshot + tail from any point."""
import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentops.jsonstate import json_plain
from runs.engine.core import reducer
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.snapshots import load_state, replay_state, snapshot_build
from runs.statuses import RunStatus

_text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
_call = st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "args": st.dictionaries(_text, st.integers(), max_size=2)})


@st.composite
def event_specs(draw):
    """Draw a plausible sequence of run events (as type + data)."""
    specs = []
    turn = 0
    open_ids: list[str] = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["turn", "result", "step", "note", "signal", "wait", "compact"]))
        if kind == "turn":
            turn += 1
            calls = [
                {"id": f"tc_{turn}_{j}", **c} for j, c in enumerate(draw(st.lists(_call, max_size=3)))
            ]
            open_ids += [c["id"] for c in calls]
            specs.append(("model.requested", {"step": "main", "turn": turn}))
            specs.append(("model.replied", {"step": "main", "turn": turn, "text": draw(_text),
                          "calls": calls, "usage": {"tokens": draw(st.integers(0, 99))}}))
        elif kind == "result" and open_ids:
            cid = open_ids.pop(draw(st.integers(0, len(open_ids) - 1)))
            specs.append(("tool.result", {"id": cid, "status": draw(st.sampled_from(["succeeded", "failed"])),
                          "summary": draw(_text), "facts": {"v": draw(st.integers())}}))
        elif kind == "step":
            specs.append((draw(st.sampled_from(["step.started", "step.completed", "step.skipped"])), {"step": "main"}))
        elif kind == "signal":
            specs.append(("signal.received", {"name": draw(_text), "payload": {}}))
        elif kind == "wait":
            specs.append(("wait.started", {"kind": "timer", "until": None}))
        elif kind == "compact" and turn:
            specs.append(("context.compacted", {"upto_turn": draw(st.integers(0, turn)), "summary": draw(_text)}))
        else:
            specs.append(("run.note", {"text": draw(_text)}))
    return specs


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=event_specs(), cut=st.integers(0, 60))
def test_snapshot_plus_tail_equals_full_replay(run, specs, cut):
    from runs.models import Event, Snapshot

    Event.objects.filter(run=run, seq__gt=1).delete()
    Snapshot.objects.filter(run=run).delete()
    run.last_seq = 1
    run.save(update_fields=["last_seq"])
    event_append(run=run, events=[NewEvent(t, d) for t, d in specs])
    full = replay_state(run.pk)
    cut_seq = min(cut, run.last_seq)
    at_cut = load_state(run.pk, upto_seq=cut_seq)
    snapshot_build(run_id=run.pk, state=at_cut, phase="test", agent_version="1").save()
    assert load_state(run.pk) == full
    assert load_state(run.pk, upto_seq=cut_seq) == at_cut


def test_reduce_does_not_touch_its_input():
    state = reducer.empty_state()
    before = copy.deepcopy(state)
    after = reducer.reduce(state, {"seq": 1, "type": "run.note", "data": {"text": "x"}})
    assert state == before and after["notes"] == ["x"]


def test_same_result_delivered_twice_is_one_fact():
    state = reducer.empty_state()
    events = [
        {"seq": 1, "type": "model.replied", "data": {"step": "s", "turn": 1, "calls": [{"id": "tc_1", "name": "a", "args": {}}]}},
        {"seq": 2, "type": "tool.result", "data": {"id": "tc_1", "status": "succeeded", "facts": {"x": 1}}},
        {"seq": 3, "type": "tool.result", "data": {"id": "tc_1", "status": "succeeded", "facts": {"x": 1}}},
    ]
    final = reducer.fold(state, events)
    assert final["facts"] == {"tc_1": {"x": 1}}
    assert final["usage"]["tool_calls"] == 1
    assert [c["result"]["facts"] for t in final["turns"] for c in t["calls"]] == [{"x": 1}]


def test_a_status_given_as_its_enum_member_is_kept_as_plain_text():
    state = reducer.reduce(reducer.empty_state(),
                           {"seq": 1, "type": "run.status", "data": {"to": RunStatus.RUNNING}})
    assert type(state["status"]) is str and state["status"] == "running"
    assert json_plain(state)  # a snapshot's JSON check passes in its one quick walk
