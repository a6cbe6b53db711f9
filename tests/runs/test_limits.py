"""Per-tool concurrency and rate limits hold across workers: at the limit a run queues."""
import pytest

from ledger.models import ToolCall, ToolLimit
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.factories import make_run
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


def _busy_elsewhere(tool):
    """A call of ``tool`` running on another worker for another run."""
    other = make_run()
    return ToolCall.objects.create(tool_call_id="tc_elsewhere", run=other, step_key="s", turn=1,
                                   tool=tool, args_hash="x", idempotency_key="k-elsewhere",
                                   status="running")


def test_at_the_concurrency_limit_the_run_waits_then_goes(engine):
    ToolLimit.objects.create(tool="lookup", concurrency=1)
    busy = _busy_elsewhere("lookup")
    engine.make_agent("lim", {"s": [engine.call("lookup", item="x"), engine.say("ok")]},
                      plan=["s"])
    run = run_start(agent="lim", goal="g")
    assert drive(run) == "waiting"
    assert run.wait_kind == "timer" and "concurrency/rate limit" in run.wait_data["reason"]
    assert ToolCall.objects.get(run=run).status == "pending"
    with later(3):
        sweep_once()
        assert drive(run) == "waiting"  # still full: it queues again, no retry storm
    ToolCall.objects.filter(pk=busy.pk).update(status="succeeded")
    with later(6):
        sweep_once()
        assert drive(run) == "succeeded"


def test_rate_limit_spreads_calls_over_the_minute(engine):
    ToolLimit.objects.create(tool="lookup", rate_per_minute=2)
    engine.make_agent("rate", {"s": [engine.call("lookup", item="x"), engine.say("ok")]},
                      plan=["s"])
    runs = [run_start(agent="rate", goal=f"g{i}", input={"i": i}) for i in range(3)]
    assert [drive(r) for r in runs] == ["succeeded", "succeeded", "waiting"]
    assert runs[2].wait_until is not None
    with later(61):
        sweep_once()
        assert drive(runs[2]) == "succeeded"
