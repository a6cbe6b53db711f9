"""RunSession: units commit what the session applied to its state, deferred events included."""
import pytest

from runs.engine.runtime.snapshots import load_state, replay_state
from runs.event_types import EventType
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def test_a_context_compaction_is_written_with_the_replys_unit(engine):
    turns = 40
    script = {"s": [engine.call("lookup", item=f"item-{i}") for i in range(turns)]
              + [engine.say("ok")]}
    engine.make_agent("long", script, plan=["s"], max_turns_per_step=100)
    run = run_start(agent="long", goal="g")
    assert drive(run) == "succeeded"
    events = list(Event.objects.filter(run=run).order_by("seq"))
    compactions = [i for i, e in enumerate(events) if e.type == EventType.CONTEXT_COMPACTED]
    assert compactions, "40 turns must compact the context"
    for i in compactions:
        nxt = events[i + 1]
        # Same unit: the reply that followed the compaction carries the same commit time.
        assert nxt.type == EventType.MODEL_REPLIED and nxt.at == events[i].at
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert replay_state(run.pk) == load_state(run.pk)
