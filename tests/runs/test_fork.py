"""Fork: a new run from any event of another, with its origin recorded and no ledger copied."""
import pytest

from agentops.errors import InvalidInput
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event
from runs.services import run_fork, run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def done(engine):
    """A finished mixed run (quote, pay, ship, notify)."""
    engine.make_agent("forkme", engine.MIXED_SCRIPT, plan=["quote", "pay", "ship", "notify"])
    run = run_start(agent="forkme", goal="sell")
    assert drive(run) == "succeeded"
    return run


def _seq(run, type_, **data):
    for e in Event.objects.filter(run=run, type=type_).order_by("seq"):
        if all(e.data.get(k) == v for k, v in data.items()):
            return e.seq
    raise AssertionError(f"no {type_} {data}")


def test_fork_after_a_step_reruns_only_what_came_later(engine, done):
    seq = _seq(done, "step.completed", step="pay")
    fork = run_fork(run=done, seq=seq, actor="alice")
    assert fork.status == "queued" and fork.forked_from_id == done.pk
    assert fork.forked_at_seq == seq and fork.steps_done == 2
    assert not ToolCall.objects.filter(run=fork).exists()
    assert drive(fork) == "succeeded"
    assert engine.world.count("charge") == 1  # paid before the fork point: not again
    assert engine.world.count("ship") == 2 and engine.world.count("email") == 2
    assert replay_state(fork.pk) == load_state(fork.pk)
    assert load_state(done.pk, upto_seq=seq)["facts"].items() <= load_state(fork.pk)["facts"].items()


def test_calls_open_at_the_fork_point_are_closed_not_carried_over(engine, done):
    seq = _seq(done, "model.replied", step="ship", turn=_turn(done, "ship"))
    fork = run_fork(run=done, seq=seq, actor="alice")
    ships_before = engine.world.count("ship")
    state = load_state(fork.pk)
    (call,) = [c for t in state["turns"] if t["step"] == "ship" for c in t["calls"]]
    assert call["result"]["error"]["category"] == "forked"
    assert state["open_calls"] == {}
    assert drive(fork) == "succeeded"
    assert engine.world.count("ship") == ships_before
    assert replay_state(fork.pk) == load_state(fork.pk)


def _turn(run, step):
    return [e.data["turn"] for e in Event.objects.filter(run=run, type="model.replied")
            if e.data["step"] == step and e.data.get("calls")][0]


def test_fork_rejects_a_seq_outside_the_log(done):
    with pytest.raises(InvalidInput):
        run_fork(run=done, seq=done.last_seq + 1, actor="alice")
