"""The sweep's one look for due work: every part with work is flagged, an idle sweep is cheap."""
from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentops import clock
from approvals.models import Approval
from approvals.notify.models import NotifyTrack
from ledger.models import ToolCall
from runs.models import Run, Signal
from runs.sweep_due import sweep_due
from runs.sweeper import sweep_once
from tests.factories import make_run

pytestmark = pytest.mark.django_db

_PAST = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)


def _call(run: Run, status: str = "pending") -> ToolCall:
    return ToolCall.objects.create(tool_call_id=f"tc_{run.pk.hex[:20]}", run=run, step_key="main", turn=1,
                                   tool="t", args_hash="h", idempotency_key=f"k-{run.pk}",
                                   status=status)


def _waiting(kind: str, **fields) -> Run:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status="waiting", wait_kind=kind, **fields)
    return run


def _requeued() -> None:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(updated_at=_PAST)


def _deadlines() -> None:
    _waiting("timer", wait_until=clock.now() + dt.timedelta(hours=1), deadline=_PAST)


def _timers() -> None:
    _waiting("timer", wait_until=_PAST)


def _approvals() -> None:
    run = _waiting("approval")
    Approval.objects.create(run=run, tool_call=_call(run), tool="t", expires_at=_PAST,
                            state_seq=1)


def _signals() -> None:
    run = _waiting("signal", wait_until=clock.now() + dt.timedelta(hours=1))
    Signal.objects.create(run=run, name="go", key="k1", payload={})


def _children() -> None:
    _waiting("children", wait_until=clock.now() + dt.timedelta(hours=1))


def _timeouts() -> None:
    _waiting("signal", wait_until=_PAST)


def _stragglers() -> None:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status="blocked")
    _call(run, status="running")


def _escalations() -> None:
    NotifyTrack.objects.create(key="t1", subject="stuck", run=make_run(), due_at=_PAST)


DUE = {"requeued": _requeued, "deadlines": _deadlines, "timers": _timers,
       "approvals": _approvals, "signals": _signals, "children": _children,
       "timeouts": _timeouts, "stragglers": _stragglers, "escalations": _escalations}


def test_nothing_is_due_in_an_idle_database():
    assert not any(sweep_due().values())


@pytest.mark.parametrize("part", sorted(DUE))
def test_due_work_of_each_kind_flags_its_part(part):
    DUE[part]()
    due = sweep_due()
    assert due[part], due
    # a waiting signal or fan-out run is also a timeout candidate once its wait_until passed;
    # nothing else lights up
    assert {p for p, flag in due.items() if flag} - {part, "timeouts", "deadlines"} == set()


def test_work_not_yet_due_flags_nothing():
    _waiting("timer", wait_until=clock.now() + dt.timedelta(hours=1))
    Run.objects.filter(pk=make_run().pk).update(status="blocked", deadline=clock.now()
                                                + dt.timedelta(hours=1))
    NotifyTrack.objects.create(key="t2", subject="stuck", run=make_run(),
                               due_at=clock.now() + dt.timedelta(hours=1))
    assert not any(sweep_due().values())


def test_an_idle_sweep_asks_once_and_stamps_its_heartbeat_in_one_statement():
    sweep_once(name="sweeper@test:1", recover=False)  # the first one inserts the heartbeat
    with CaptureQueriesContext(connection) as queries:
        report = sweep_once(name="sweeper@test:1", recover=False)
    assert report.total() == 0
    # Before: one query (or more) per part, and a locked read plus an update for the stamp.
    assert len(queries) <= 2, [q["sql"][:80] for q in queries]
