"""A read replica of our own: a real primary and streaming standby (tests/replica_cluster.py).

The console's list pages read the standby, its writer sees their own write at once from the
primary (read-your-writes), a lagging standby is announced in the top bar, actions and the
engine read the primary only, and a dead standby costs no error page. Replay is paused on the
standby (pg_wal_replay_pause) to make it lag on purpose. The last test is the failover drill
(it promotes the standby, so it runs last in this module).
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agentops.doctor import doctor_checks
from agentops.replica.probe import _cache, replica_status
from runs.models import Event, Run
from runs.services import run_start
from tests.conftest import drive
from tests.failover_parts import Reconnects, run_parts
from approvals.roles import OPERATOR
from tests.console_factories import make_user
from tests.replica_cluster import STANDBY_MAX_CONNECTIONS, Pair, free_port
from tests.replica_pair import pair_connected, pair_or_skip

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def pair(django_db_blocker) -> Iterator[Pair]:
    """A primary and its synchronous streaming standby, this process's databases meanwhile."""
    pair_or_skip()
    cluster = Pair().start()
    try:
        with django_db_blocker.unblock(), pair_connected(cluster):
            cluster.synchronous()
            yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def paused(pair: Pair) -> Iterator[Pair]:
    """The standby with replay paused (it receives WAL but applies none) for one test."""
    pair.sql("standby", "SELECT pg_wal_replay_pause()")
    _cache.update(at=-1e9)
    try:
        yield pair
    finally:
        pair.sql("standby", "SELECT pg_wal_replay_resume()")
        _cache.update(at=-1e9)


@pytest.fixture
def people(pair: Pair) -> dict[str, Client]:
    """Two signed-in operators' browsers: ``writer`` and ``reader``."""
    browsers = {}
    for name in ("writer", "reader"):
        user = User.objects.filter(username=f"r-{name}").first() or make_user(
            f"r-{name}", OPERATOR)
        browsers[name] = Client()
        browsers[name].force_login(user)
    return browsers


def _start(browser: Client, goal: str) -> str:
    """Start a run through the API as the browser's user; return its id."""
    response = browser.post("/api/runs", json.dumps({"agent": "support-returns", "goal": goal,
                                                     "input": {}}),
                            content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _lists(browser: Client, goal: str) -> bool:
    """Return whether the queue's All tab shows a run with ``goal``."""
    response = browser.get("/?tab=all")
    assert response.status_code == 200
    return goal in response.content.decode()


def test_lists_read_the_replica_and_a_writer_sees_their_own_run_at_once(paused, people):
    """Replay paused: the writer's new run is in their list (primary), not in another
    person's (replica), whose page says it may be behind; after replay resumes it is in both."""
    goal = f"replica {uuid.uuid4().hex[:8]}"
    run_id = _start(people["writer"], goal)
    time.sleep(1.2)  # the standby's last replayed transaction grows older than a second
    assert _lists(people["writer"], goal), "the writer did not see their own run"
    assert not _lists(people["reader"], goal), "the list did not read the replica"
    page = people["reader"].get("/?tab=all").content.decode()
    assert "data-replica-lag=" in page and "s behind" in page
    assert "data-replica-lag=" not in people["writer"].get("/?tab=all").content.decode()
    assert Run.objects.filter(pk=run_id).exists()
    paused.sql("standby", "SELECT pg_wal_replay_resume()")
    _cache.update(at=-1e9)
    deadline = time.monotonic() + 10
    while not _lists(people["reader"], goal) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _lists(people["reader"], goal)
    deadline = time.monotonic() + 3  # the last answer, while it caught up, is kept up to 1 s
    while "data-replica-lag=" in people["reader"].get("/?tab=all").content.decode():
        assert time.monotonic() < deadline, "the lag notice stayed on a caught-up replica"
        time.sleep(0.2)


def test_an_action_reads_the_primary(paused, people):
    """A run the replica has not replayed is not in the reader's list, yet their cancel finds
    and cancels it: actions never read the replica."""
    goal = f"cancel {uuid.uuid4().hex[:8]}"
    run_id = _start(people["writer"], goal)
    assert not _lists(people["reader"], goal)
    response = people["reader"].post(f"/api/runs/{run_id}/cancel",
                                     json.dumps({"reason": "replica test", "confirm": "terminate"}),
                                     content_type="application/json")
    assert response.status_code == 200, response.content
    assert Run.objects.get(pk=run_id).status == "cancelled"


def test_engine_reads_never_reach_the_replica(paused, engine):
    """A run driven to its end by the engine in this process sends no query to the replica
    (and the replica, paused, has never seen the run)."""
    engine.make_agent("mixed", engine.MIXED_SCRIPT, plan=["quote", "pay", "ship", "notify"])
    run = run_start(agent="mixed", goal="sell a book")
    with CaptureQueriesContext(connections["replica"]) as on_replica:
        assert drive(run) == "succeeded"
    assert not on_replica.captured_queries
    assert not paused.sql("standby", "SELECT 1 FROM runs_run WHERE id = %s", [run.pk])


def test_the_doctor_names_the_replica_and_its_synchronous_commits(pair):
    """``agentops doctor`` finds the standby replaying and the primary waiting for it."""
    check = next(c for c in doctor_checks() if c.name == "replica")
    assert check.ok and "The replica answers" in check.message
    assert "Commits wait for standby (synchronous_commit=on)" in check.message


def test_the_doctor_counts_web_sessions_against_the_replicas_own_max_connections(pair,
                                                                                  settings):
    """The standby allows 150 sessions (its primary 120): 7 web processes x a pool of 20 fit
    it with the reserve of 10, 8 do not; the sessions open on it now are reported."""
    settings.AGENTOPS_WEB_DB_POOL_MAX, settings.AGENTOPS_DB_RESERVE = 20, 10
    with connections["replica"].cursor() as cur:
        cur.execute("SELECT 1")  # this process's session on the standby: one open now at least
    settings.AGENTOPS_WEB_PROCESSES = 7
    check = next(c for c in doctor_checks() if c.name == "replica_sessions")
    assert check.ok, check.message
    assert "7 web process(es) x 20 = 140 sessions at most" in check.message
    assert f"max_connections {STANDBY_MAX_CONNECTIONS} minus the reserve of 10" in check.message
    assert int(re.search(r"(\d+) open now", check.message).group(1)) >= 1
    settings.AGENTOPS_WEB_PROCESSES = 8
    check = next(c for c in doctor_checks() if c.name == "replica_sessions")
    assert not check.ok and "raise the replica's max_connections" in check.message


def test_a_web_process_reads_the_standby_through_its_bounded_pool(pair, people, tmp_path,
                                                                 settings):
    """A real daphne (agentops.asgi) on the pair serves 5 bursts of 40 simultaneous queue
    pages from the standby: they share its pool of AGENTOPS_WEB_DB_POOL_MAX (4) standby
    sessions, where an unpooled standby opened one session per page. The standby never
    holds more of the process's sessions than the doctor's bound."""
    from agentops.db_budget import web_replica_sessions_max
    from tests.e2e.test_connection_budget import daphne_server

    cookie = f"sessionid={people['reader'].cookies['sessionid'].value}"
    env = {"AGENTOPS_REPLICA_URL": pair.url("standby"), "AGENTOPS_WEB_DB_POOL_MAX": "4",
           "SECRET_KEY": settings.SECRET_KEY, "AGENTOPS_STATIC_FINDERS": "1"}
    with daphne_server(tmp_path, **env) as (proc, base):
        with StandbySessions(pair.url("standby"), proc.pid) as seen:
            statuses = []
            for _ in range(5):
                statuses += _burst(f"{base}/?tab=all", cookie, 40)
    assert statuses == [200] * 200, statuses
    settings.AGENTOPS_WEB_DB_POOL_MAX = 4
    assert 1 <= seen.peak <= web_replica_sessions_max() == 4, seen.peak
    assert 1 <= len(seen.sessions) <= 4, f"{len(seen.sessions)} standby sessions for 200 pages"


def test_a_web_process_reads_around_a_dead_standby_through_its_pool(pair, people, tmp_path,
                                                                   settings):
    """A real daphne whose standby does not answer (a port nobody listens on) serves the
    queue from the primary: the first page waits for the standby's pool no longer than its
    connect_timeout (2 s), and the pages after it do not ask the standby again (5 s)."""
    from tests.e2e.test_connection_budget import daphne_server

    cookie = f"sessionid={people['reader'].cookies['sessionid'].value}"
    env = {"AGENTOPS_REPLICA_URL": f"postgres://postgres@127.0.0.1:{free_port()}/agentops",
           "SECRET_KEY": settings.SECRET_KEY, "AGENTOPS_STATIC_FINDERS": "1"}
    took = []
    with daphne_server(tmp_path, **env) as (_proc, base):
        for _ in range(4):
            began = time.monotonic()
            assert _burst(f"{base}/?tab=all", cookie, 1) == [200]
            took.append(time.monotonic() - began)
    assert took[0] < 6, took  # the pool's wait (2 s, not its 60 s for the primary) and the page
    assert max(took[1:]) < 1.5, took
    print(f"pages with a dead standby, s: {[round(t, 2) for t in took]}")


class StandbySessions:
    """Sample one process's sessions on the standby (application_name ``host:pid``) every
    few milliseconds on a thread: the most open at once, and every session seen."""

    def __init__(self, url: str, pid: int) -> None:
        self.conn, self.name = psycopg.connect(url, autocommit=True), f"%:{pid}"
        self.peak, self.sessions = 0, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rows = self.conn.execute("SELECT pid, backend_start FROM pg_stat_activity "
                                     "WHERE application_name LIKE %s", [self.name]).fetchall()
            self.peak = max(self.peak, len(rows))
            self.sessions.update(rows)
            time.sleep(0.005)

    def __enter__(self) -> StandbySessions:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.conn.close()


def _burst(url: str, cookie: str, n: int) -> list[int]:
    """GET ``url`` as the cookie's person ``n`` times at once; return the statuses."""
    def get(_: int) -> int:
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return response.status

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(get, range(n)))


@pytest.fixture
def replica_gone(pair: Pair) -> Iterator[callable]:
    """Return a function that makes the replica unreachable (its port: one nobody listens
    on); put back at the end."""
    replica = connections["replica"].settings_dict
    port = replica["PORT"]

    def go() -> None:
        connections["replica"].close()
        replica["PORT"] = str(free_port())

    yield go
    connections["replica"].close()
    replica["PORT"] = port
    _cache.update(at=-1e9, status=None, down_until=0.0)


def test_a_dead_replica_is_read_around_with_a_log_line(people, replica_gone, caplog):
    """With the replica unreachable a list page is served from the primary, and said once."""
    goal = f"dead {uuid.uuid4().hex[:8]}"
    _start(people["writer"], goal)
    replica_gone()
    _cache.update(at=-1e9, down_until=0.0)
    with caplog.at_level(logging.WARNING, logger="agentops.replica"):
        assert _lists(people["reader"], goal)
    assert "replica unreachable" in caplog.text and "a query of" not in caplog.text


def test_a_replica_lost_under_a_page_is_read_around(people, replica_gone, caplog):
    """The replica answered the probe, then went away before the page's own queries: the
    page is served again from the primary, not as an error page."""
    goal = f"lost {uuid.uuid4().hex[:8]}"
    _start(people["writer"], goal)
    time.sleep(0.3)  # replayed by now (not paused)
    assert replica_status(fresh=True) is not None  # the answer pages reuse for 1 s
    replica_gone()
    with caplog.at_level(logging.WARNING, logger="agentops.replica"):
        assert _lists(people["reader"], goal)
    assert "replica unreachable, reading the primary for 5s: a query of / failed" in caplog.text


RUNS = 12


def _first_event_after(run_id: str, at: float) -> tuple[float, float]:
    """Return when a run's tick first wrote and when it ended, in seconds after ``at``."""
    events = list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("type", "at"))
    first = next(when for kind, when in events if kind not in ("run.created", "run.status"))
    return first.timestamp() - at, events[-1][1].timestamp() - at


def _committed(pair: Pair) -> set[tuple]:
    """Return every (run, seq, type) event the primary has committed so far."""
    return set(pair.sql("primary", "SELECT run_id::text, seq, type FROM runs_event"))


def test_failover_drill_loses_nothing_committed_and_repeats_no_effect(pair, settings,
                                                                      tmp_path, monkeypatch):
    """Workers on a multi-host URL run effectful runs; the primary is stopped hard and the
    synchronous standby promoted mid-flight. The workers reconnect to it, every run ends (and
    one started after the promotion), each effect is in the world exactly once, and every
    event committed before is still there. It prints what the in-flight runs waited for."""
    from tests import failover_agents
    from tests.e2e.workers import Worker, wait_until

    monkeypatch.setenv("AGENTOPS_TEST_WORLD", str(tmp_path / "world.txt"))
    settings.AGENTOPS_ENQUEUE_TICKS = True
    host = Worker("failover", tmp_path, env={
        "DATABASE_URL": pair.failover_url(), "AGENTOPS_AGENTS": "tests.failover_agents",
        "AGENTOPS_TEST_WORLD": str(tmp_path / "world.txt"), "AGENTOPS_RUNS_IN_FLIGHT": "6"})
    host.start()
    try:
        ids = [str(run_start(agent="failover_ship", goal=f"drill {i}", input={}).pk)
               for i in range(RUNS)]
        wait_until(lambda: len(failover_agents.world_lines()) >= RUNS, 60,
                   "the workers to make effects")
        before = _committed(pair)
        in_flight = RUNS - Run.objects.filter(pk__in=ids, status="succeeded").count()
        leases = dict(pair.sql("primary", "SELECT id::text, extract(epoch FROM lease_expires_at)"
                               " FROM runs_run WHERE status = 'running' AND id::text = ANY(%s)",
                               [ids]))
        began = time.time()
        with Reconnects(pair.url("standby"), began, host.pids()) as reconnects:
            pair.promote()
            promoted = time.time() - began
            connections.close_all()
            connections["default"].settings_dict["PORT"] = str(pair.ports["standby"])
            lost = before - set(pair.sql("standby",
                                         "SELECT run_id::text, seq, type FROM runs_event"))
            assert not lost, f"{len(lost)} committed events lost in the failover: {sorted(lost)[:5]}"
            late = str(run_start(agent="failover_ship", goal="after the failover", input={}).pk)
            late_at = time.time()
            ids.append(late)
            wait_until(lambda: Run.objects.filter(pk__in=ids, status__in=[
                "succeeded", "failed", "cancelled", "blocked", "unknown"]).count() == RUNS + 1,
                90, f"all {RUNS + 1} runs to end on the new primary")
            took = time.time() - began
    finally:
        host.stop()
    assert in_flight, "every run had ended before the failover: nothing was in flight"
    statuses = sorted(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == ["succeeded"] * (RUNS + 1), (statuses, host.log_path.read_text()[-3000:])
    keys = [key for key, _ in failover_agents.world_lines()]
    assert len(keys) == (RUNS + 1) * len(failover_agents.ORDERS), "an effect is missing or extra"
    assert len(set(keys)) == len(keys), "an effect happened twice"
    recovered = Event.objects.filter(run_id__in=ids, type="run.recovered").count()
    first_unit = _first_event_after(late, late_at)
    # q2's pusher stopped for 10 s when its database failed (runs.cli.q2_host).
    assert first_unit[0] < 6, f"a run started after the promotion waited {first_unit[0]:.1f}s"
    print(f"failover: {in_flight} runs in flight and {len(before)} events committed at the "
          f"promotion, none lost; {recovered} recoveries; every run done {took:.1f}s after it; "
          f"parts (s after it): promoted {promoted:.2f}, reconnected "
          f"{sorted(reconnects.first_seen.values())}, {run_parts(leases, began)}; a run "
          f"started {late_at - began:.2f}s after it: first unit {first_unit[0]:.2f}s, done "
          f"{first_unit[1]:.2f}s later")
