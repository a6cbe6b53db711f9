"""The sweeper: recovers dead workers' runs, wakes timers, expires approvals per policy."""
import pytest

from approvals.models import Approval
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.engine.runtime.transition import run_claim
from runs.models import Event, Run, WorkerHeartbeat
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.runs.waits_helpers import approval_agent, later

pytestmark = pytest.mark.django_db


def _types(run):
    return list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


def test_expired_lease_is_requeued_and_counted_then_finishes(engine):
    engine.make_agent("rec", {"s": [engine.call("lookup", item="x"), engine.say("ok")]}, plan=["s"])
    run = run_start(agent="rec", goal="g")
    run_claim(run_id=run.pk, owner="dead-worker", ttl_s=5)  # the worker dies holding it
    assert sweep_once().recovered == []  # lease still valid
    with later(6):
        report = sweep_once(name="sweeper-test")
    assert report.recovered == [run.pk]
    run.refresh_from_db()
    assert run.status == "queued" and run.recoveries == 1
    assert drive(run) == "succeeded"
    assert WorkerHeartbeat.objects.filter(name="sweeper-test").exists()


def test_recovery_limit_blocks_the_run(engine):
    engine.make_agent("rec2", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent="rec2", goal="g")
    Run.objects.filter(pk=run.pk).update(recovery_limit=1, recoveries=1)
    run_claim(run_id=run.pk, owner="dead", ttl_s=1)
    with later(2):
        sweep_once()
    run.refresh_from_db()
    assert run.status == "blocked" and run.attention_reason == "recovery_limit"
    assert "lost its worker 2 times" in run.attention_detail


def test_due_timer_wakes_and_future_timer_waits(engine):
    from ledger.errors import ToolTransient

    engine.world.fail_next["lookup"] = [ToolTransient("503", next_retry_delay=30)]
    engine.make_agent("timer", {"s": [engine.call("lookup", item="x"), engine.say("ok")]},
                      plan=["s"])
    run = run_start(agent="timer", goal="g")
    assert drive(run) == "waiting" and run.wait_kind == "timer"
    assert sweep_once().timers == []
    with later(31):
        assert sweep_once().timers == [run.pk]
    assert _types(run)[-2:] == ["wait.ended", "run.status"]
    with later(31):
        assert drive(run) == "succeeded"
    assert replay_state(run.pk) == load_state(run.pk)


def test_stale_queued_run_is_enqueued_again(engine):
    engine.make_agent("stale", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent="stale", goal="g")
    assert sweep_once().requeued == []
    with later(60):
        assert sweep_once().requeued == [run.pk]
        assert sweep_once().requeued == []  # once per period, not every sweep


def _approval_run(engine, name, on_expiry):
    script = {"s": [engine.call("refund", order="o1"), engine.say("done")]}
    approval_agent(name, on_expiry, script)
    run = run_start(agent=name, goal="refund")
    assert drive(run) == "waiting" and run.wait_kind == "approval"
    return run, Approval.objects.get(run=run)


def test_expired_approval_denies_by_default_and_the_run_goes_on(engine):
    run, approval = _approval_run(engine, "exp_deny", "deny")
    with later(61):
        assert sweep_once().approvals == [approval.pk]
    approval.refresh_from_db()
    assert approval.status == "expired"
    assert ToolCall.objects.get(run=run).status == "rejected"
    # It goes on, but a denied write is never a clean success.
    assert drive(run) == "completed_with_exceptions"
    run.refresh_from_db()
    assert [e["kind"] for e in run.exceptions] == ["approval_expired"]
    result = load_state(run.pk)["turns"][0]["calls"][0]["result"]
    assert result["status"] == "rejected" and "expired" in result["error"]["message"]


def test_expired_approval_can_cancel_the_run(engine):
    run, approval = _approval_run(engine, "exp_cancel", "cancel_run")
    with later(61):
        sweep_once()
    run.refresh_from_db()
    assert run.status == "cancelled" and "expired" in run.attention_detail + _detail(run)


def _detail(run):
    return Event.objects.filter(run=run, type="run.status").last().data["detail"]


def test_expired_approval_is_requested_again(engine):
    run, approval = _approval_run(engine, "exp_again", "rerequest")
    with later(61):
        sweep_once()
        assert sweep_once().approvals == []
    fresh = Approval.objects.get(run=run, status="pending")
    assert fresh.pk != approval.pk and fresh.tool_call_id == approval.tool_call_id
    run.refresh_from_db()
    assert run.status == "waiting" and run.wait_data["approvals"] == [fresh.pk]


def test_expired_approval_escalates_to_an_operator(engine):
    run, approval = _approval_run(engine, "exp_esc", "escalate")
    with later(61):
        sweep_once()
        sweep_once()
    approval.refresh_from_db()
    assert approval.escalated and approval.status == "expired"
    assert _types(run).count("approval.expired") == 1
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == ("blocked", "approval_expired")
    assert run.recommended_action == "retry"


def test_a_malformed_wait_does_not_stop_the_sweeper_recovering_others(engine):
    import datetime as dt

    from runs.models import Run
    from tests.factories import make_run

    bad = make_run()
    Run.objects.filter(pk=bad.pk).update(status="waiting", wait_kind="children",
                                         wait_data={"count": 2},
                                         wait_until=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    lost = make_run()
    Run.objects.filter(pk=lost.pk).update(status="running", lease_owner="dead:1",
                                          lease_expires_at=dt.datetime(2000, 1, 1,
                                                                       tzinfo=dt.timezone.utc))
    report = sweep_once()
    # On PostgreSQL the owner's missing session recovers it first (release on death).
    assert lost.pk in report.recovered + report.dead
    lost.refresh_from_db()
    assert lost.status == "queued" and lost.recoveries == 1


@pytest.mark.postgres
def test_a_run_whose_owner_process_is_gone_is_recovered_before_its_lease_expires(engine):
    """Release on death: no session named after the owner means the owner is dead."""
    import datetime as dt

    from agentops import clock
    from runs.models import Run
    from runs.tasks import worker_name
    from tests.factories import make_run

    fresh = clock.now() + dt.timedelta(seconds=60)
    dead, alive = make_run(), make_run()
    Run.objects.filter(pk=dead.pk).update(status="running", lease_owner="gone-host:4000000",
                                          lease_expires_at=fresh)
    Run.objects.filter(pk=alive.pk).update(status="running", lease_owner=worker_name(),
                                           lease_expires_at=fresh)
    report = sweep_once()
    assert report.dead == [dead.pk]
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert (dead.status, dead.urgent, dead.recoveries) == ("queued", True, 1)
    assert alive.status == "running"
