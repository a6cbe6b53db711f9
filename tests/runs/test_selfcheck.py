"""The self-check after a restore: corrupt one thing at a time, recover, see it named."""
import datetime as dt

import pytest
from django.core.files.storage import storages

from agentops import clock
from agentops.llm.scripted import call, say
from approvals.models import Approval
from ledger.models import ToolCall
from runs.engine.runtime import session as session_mod
from runs.engine.runtime.recovery import runs_recover_expired
from agentops.control import RunControl
from runs.models import Event, Run
from runs.services import run_fork, run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
SCRIPT = {"fetch": [call("big", n=400), say("fetched")],
          "use": [call("lookup", item="x"), say("used")]}


class Crash(RunControl):
    """The worker dies right after the first step completes."""


@pytest.fixture
def crashed_run(engine, monkeypatch, tmp_path):
    """A run killed after its first step (which stored an artifact), then recovered."""
    source = tmp_path / "data.csv"
    source.write_text("a,b\n1,2\n")
    engine.make_agent("checked", SCRIPT, plan=["fetch", "use"])
    run = run_start(agent="checked", goal="use the data", input={"source": f"file:{source}"})
    real = session_mod.RunSession.commit

    def commit(self, events, **kwargs):
        real(self, events, **kwargs)
        if any(e.type == "step.completed" for e in events):
            raise Crash("worker killed")

    monkeypatch.setattr(session_mod.RunSession, "commit", commit)
    with pytest.raises(Crash):
        drive(run)
    monkeypatch.setattr(session_mod.RunSession, "commit", real)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert runs_recover_expired() == [run.pk]
    run.refresh_from_db()
    return run, source


def _big_call(run: Run) -> ToolCall:
    return ToolCall.objects.get(run=run, tool="big")


def _corrupt_artifact(run, source):
    sha = _big_call(run).artifact_sha256
    with storages["artifacts"].open(f"{sha[:2]}/{sha[2:4]}/{sha}", "wb") as fh:
        fh.write(b"not what was stored")
    return f"the result artifact of call {_big_call(run).tool_call_id}: artifact {sha} failed its checksum"


def _corrupt_ledger_row(run, source):
    call = _big_call(run)
    ToolCall.objects.filter(pk=call.pk).update(status="failed")
    return f"call {call.tool_call_id} (big) succeeded in the log but the ledger says failed"


def _unreconciled_row(run, source):
    ToolCall.objects.create(tool_call_id="tc_stray", run=run, step_key="use", turn=9, tool="ship",
                            args={"order": "o-9"}, args_hash="h", idempotency_key="k-stray",
                            effect="write", status="running")
    return "ledger row tc_stray (ship) is running but the run does not list it as open"


def _expired_approval(run, source):
    call = _big_call(run)
    a = Approval.objects.create(run=run, tool_call=call, tool="big", state_seq=1,
                                expires_at=clock.now() - dt.timedelta(minutes=5))
    return f"approval {a.pk} for big ({call.tool_call_id}) expired at"


def _missing_input(run, source):
    source.unlink()
    return f"input source of the run: file {source} no longer exists"


def _changed_goal(run, source):
    Event.objects.filter(run=run, type="run.created").update(
        data={**Event.objects.get(run=run, type="run.created").data, "goal": "something else"})
    return "the goal changed: the run was created with 'something else'"


@pytest.mark.parametrize("corrupt", [_corrupt_artifact, _corrupt_ledger_row, _unreconciled_row,
                                     _expired_approval, _missing_input, _changed_goal])
def test_each_corruption_blocks_the_recovered_run_naming_the_problem(crashed_run, corrupt):
    run, source = crashed_run
    expected = corrupt(run, source)
    assert drive(run) == "blocked"
    assert run.attention_reason == "self_check_failed"
    assert expected in run.attention_detail
    failed = Event.objects.get(run=run, type="guard.self_check_failed").data["problems"]
    assert len(failed) == 1 and expected in failed[0]
    assert not ToolCall.objects.filter(run=run, tool="lookup").exists()  # nothing ran after


def test_a_clean_recovery_passes_once_and_finishes(crashed_run):
    run, _ = crashed_run
    assert drive(run) == "succeeded"
    assert Event.objects.filter(run=run, type="guard.self_checked").count() == 1


def test_a_run_never_restored_is_not_checked(engine):
    engine.make_agent("plain", SCRIPT, plan=["fetch", "use"])
    run = run_start(agent="plain", goal="use the data")
    assert drive(run) == "succeeded"
    assert not Event.objects.filter(run=run, type__startswith="guard.self").exists()


def test_a_fork_of_a_run_with_a_corrupted_artifact_is_blocked(engine):
    engine.make_agent("forked", SCRIPT, plan=["fetch", "use"])
    run = run_start(agent="forked", goal="use the data")
    assert drive(run) == "succeeded"
    _corrupt_artifact(run, None)
    fork = run_fork(run=run, seq=run.last_seq - 1)
    assert drive(fork) == "blocked"
    assert fork.attention_reason == "self_check_failed" and "failed its checksum" in fork.attention_detail
