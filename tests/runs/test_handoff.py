"""The hand-off: a recovery wakes the host's q2 processes, each once, and wakes never pile up."""
import datetime as dt
import threading
import time

import pytest

from agentops import clock
from runs import handoff
from runs.engine.runtime.recovery import runs_recover_expired
from runs.handoff import handoff_announce, handoff_install, handoff_watch
from runs.models import Run
from tests.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host():
    """This test process plays a worker host and one of its q2 processes."""
    saved = dict(handoff._state)
    yield
    handoff._state.update(saved)


class _Takes:
    def __init__(self) -> None:
        self.count = 0
        self.woken = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.woken.set()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 5
        while self.count < count and time.monotonic() < deadline:
            time.sleep(0.01)


def _watch(takes: _Takes) -> None:
    handoff._state["watcher_pid"] = 0  # a fresh q2 process
    handoff_watch(takes)


def test_a_recovered_run_wakes_the_host_s_q2_process_at_once(host):
    handoff_install(processes=1)
    takes = _Takes()
    _watch(takes)
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status="running", lease_owner="paused-host:4200",
                                         lease_expires_at=clock.now() - dt.timedelta(seconds=1))
    assert takes.count == 0  # nothing wakes it while nothing is recovered
    assert runs_recover_expired() == [run.pk]
    assert takes.woken.wait(2), "the q2 process was not woken by the recovery"


def test_wakes_nobody_took_never_pile_up(host):
    handoff_install(processes=2)
    for _ in range(5):
        handoff_announce()
    takes = _Takes()
    _watch(takes)
    takes.wait_for(2)
    time.sleep(0.3)
    assert takes.count == 2  # one per q2 process of the host, not one per announcement


def test_without_a_host_nothing_is_woken(host):
    handoff._state["wake"] = None  # ``qcluster`` run by hand, or a web process
    handoff_announce()
    takes = _Takes()
    _watch(takes)
    assert not takes.woken.wait(0.2)
