"""A worker's CPU per model step: work done once that was done per call, or per thread."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from runs.engine.runtime import loop, parking
from runs.services import run_start
from tests.conftest import drive


@pytest.mark.django_db
def test_a_tool_is_made_parkable_once_not_on_every_call(engine, monkeypatch) -> None:
    import bench.agents  # noqa: F401  (bench-noop: a no-op tool per turn)

    made = []
    real = dataclasses.replace
    monkeypatch.setattr(parking.dataclasses, "replace",
                        lambda obj, **kw: made.append(obj.name) or real(obj, **kw))
    parking._PARKABLE.clear()
    run = run_start(agent="bench-noop", goal="parkable once", input={"steps": 5})
    assert drive(run) == "succeeded"
    assert made == ["noop"]  # five calls of the tool, one wrapped spec


def test_one_thread_asks_a_stale_question_while_the_others_keep_the_last_answer(
        settings) -> None:
    """Hundreds of slots find the answer stale at once: one asks, none waits for it."""
    settings.AGENTOPS_YIELD_CHECK_S = 60
    loop._asked.clear()
    asked, release = [], threading.Event()

    def ask() -> bool:
        asked.append(threading.current_thread().name)
        release.wait(10)
        return True

    first = threading.Thread(target=loop._lately, args=("urgent_waiting", ask))
    first.start()
    while not asked:
        threading.Event().wait(0.001)
    others = [loop._lately("urgent_waiting", ask) for _ in range(8)]
    release.set()
    first.join(10)
    assert len(asked) == 1 and others == [False] * 8  # the last answer (none yet: False)
    assert loop._lately("urgent_waiting", ask) is True  # the new answer, once it came
    loop._asked.clear()


def _slow_model_script(sc):
    """A model slower than AGENTOPS_READ_RIDE_MS (reads are then held, never ridden)."""
    import time

    from agentops.llm.scripted import call, say

    time.sleep(0.08)
    return call("lookup", item=f"i{sc.turn}") if sc.turn <= 6 else say("done")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_slot_keeps_its_connection_through_held_reads_and_hands_it_back_for_the_model(
        engine, pooled, settings) -> None:
    """Quick reads held with their reply (read_rides) run on the connection the slot holds:
    no release to the pool and no reacquire around each; a model call still hands it back."""
    from django.db import connection

    from runs.engine.runtime import read_rides
    from runs.models import Event

    settings.AGENTOPS_READ_RIDE_MS = 50
    engine.make_agent("slow-model-reads", _slow_model_script, plan=["s"])
    read_rides._last_ms.clear()  # the first batch of this tool is not held: no time known
    run = run_start(agent="slow-model-reads", goal="quick reads", input={})
    before = connection.pool.get_stats().get("requests_num", 0)
    assert drive(run) == "succeeded"
    taken = connection.pool.get_stats().get("requests_num", 0) - before
    assert Event.objects.filter(run=run, type="model.replied").count() == 7
    assert Event.objects.filter(run=run, type="tool.result").count() == 6
    # One checkout after each of the 7 model calls and after the first (unheld) batch of
    # reads, plus the tick's first; each of the five held batches would add one more.
    assert taken <= 7 + 2, taken
