"""Each process holds at most its stated sessions (agentops.db_budget), whatever the load.

Bursts of 40 concurrent ``GET /api/runs`` against a real ``daphne agentops.asgi:application``
(AGENTOPS_DEBUG=0, PostgreSQL), and a real worker host with hundreds of runs in flight on a
slow model server. A sampler counts the process's (or process group's) sessions in
pg_stat_activity every few milliseconds meanwhile: sessions are named ``host:pid``, the lease
keeper's ``agentops-lease-keeper-<pid>``.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.e2e.test_cold_start import _free_port, _wait_listening
from tests.e2e.workers import ROOT, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONCURRENCY, BURSTS = 40, 5
WEB_MAX = 20  # the default AGENTOPS_WEB_DB_POOL_MAX
# Idle, a 2-process host keeps each pool's minimum (2) and its one keeper (1), plus its fixed 6.
IDLE_WORKER_HOST = 2 * 2 + 1 + 6
WORKER_RUNS, WORKER_DELAY_S = 300, 8.0  # each run calls the model twice (a tool step, an answer)


def _db_url() -> str:
    return worker_env()["DATABASE_URL"]


class SessionSampler:
    """Count some processes' PostgreSQL sessions every ``every_s`` on a thread; keep the peak."""

    def __init__(self, pids: Callable[[], set[int]], every_s: float = 0.02) -> None:
        self.pids, self.every_s, self.peak = pids, every_s, 0
        self._stop = threading.Event()
        self._conn = psycopg.connect(_db_url(), autocommit=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def count(self) -> int:
        """Return the processes' sessions now."""
        pids = self.pids()
        names = [f"%:{pid}" for pid in pids] + [f"agentops-lease-keeper-{pid}" for pid in pids]
        return self._conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ANY(%s)",
            [names]).fetchone()[0]

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.count())
            time.sleep(self.every_s)

    def __enter__(self) -> SessionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def close(self) -> None:
        """Close the sampler's own connection."""
        self._conn.close()

    def settle(self, at_most: int, within_s: float) -> int:
        """Wait until the process holds ``at_most`` sessions; return what it holds then."""
        deadline = time.monotonic() + within_s
        while (now := self.count()) > at_most and time.monotonic() < deadline:
            time.sleep(0.2)
        return now


@contextmanager
def daphne_server(log_dir: Path, **env: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """A production-configured daphne on the test database; yields (process, base url)."""
    port = _free_port()
    log = open(log_dir / "daphne.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "agentops.asgi:application"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env=worker_env(**{"AGENTOPS_DEBUG": "0", "SECRET_KEY": "budget-test-" + "k" * 40,
                          "ALLOWED_HOSTS": "127.0.0.1", "AGENTOPS_SSL_REDIRECT": "0", **env}),
        start_new_session=True)
    try:
        _wait_listening(port, proc)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _get(url: str, key: str, out: list, barrier: threading.Barrier) -> None:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    barrier.wait()
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
            out.append(resp.status)
    except urllib.error.HTTPError as exc:
        out.append(exc.code)


def bursts(url: str, key: str, *, concurrency: int = CONCURRENCY, count: int = BURSTS) -> list:
    """Send ``count`` bursts of ``concurrency`` simultaneous GETs; return every status."""
    statuses: list = []
    for _ in range(count):
        barrier = threading.Barrier(concurrency)
        threads = [threading.Thread(target=_get, args=(url, key, statuses, barrier))
                   for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    return statuses


def api_key() -> str:
    """Return a new operator's API key."""
    from django.contrib.auth.models import Group, User

    from approvals.apikeys import apikey_create

    user = User.objects.create_user(username="budget-operator", password="pw-for-tests-only")
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    return apikey_create(user=user, name="budget")[1]


def test_connection_budget_web_process_stays_within_its_pool(tmp_path):
    from tests.factories import make_run

    for i in range(30):
        make_run(goal=f"listed {i}")
    key = api_key()
    with daphne_server(tmp_path, AGENTOPS_DB_POOL_IDLE_S="0.5") as (proc, base):
        sampler = SessionSampler(lambda: {proc.pid})
        try:
            with sampler:
                statuses = bursts(f"{base}/api/runs", key)
            idle = sampler.settle(at_most=2, within_s=30)
        finally:
            sampler.close()
    print(f"web process: peak {sampler.peak} sessions, idle {idle}, "
          f"{len(statuses)} responses {sorted(set(statuses))}")
    assert len(statuses) == CONCURRENCY * BURSTS
    assert [s for s in statuses if s >= 500] == []
    assert set(statuses) == {200}
    assert 0 < sampler.peak <= WEB_MAX
    assert idle <= 2  # back to the pool's minimum once idle


def test_connection_budget_worker_host_stays_within_its_pools(settings, tmp_path):
    """A worker host (2 q2 processes) with RUNS runs in flight on a model that takes
    DELAY_S a call holds at most ``worker_host_sessions_max()`` sessions, and shrinks back to
    its pools' minimum once idle."""
    from agentops.db_budget import worker_host_sessions_max
    from bench.model_server import model_env, model_server_start
    from runs.models import Run
    from runs.services import run_start
    from tests.e2e.test_density import _until_done, _warm_up
    from tests.e2e.workers import Worker

    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    settings.AGENTOPS_ENQUEUE_TICKS = True
    model, url = model_server_start(WORKER_DELAY_S, 1)
    worker = Worker("budget", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": "2",
        "AGENTOPS_TICK_SLICE_S": "60", "AGENTOPS_DB_POOL_IDLE_S": "0.5"})
    worker.start()
    sampler = SessionSampler(worker.pids, every_s=0.05)
    try:
        _warm_up()
        with sampler:
            ids = [run_start(agent="bench-remote", goal=f"budget {i}", input={}).pk
                   for i in range(WORKER_RUNS)]
            most = {"running": 0}

            def running() -> None:
                most["running"] = max(most["running"], Run.objects.filter(
                    pk__in=ids, status="running").count())

            _until_done(ids, within_s=240, each=running, pause_s=0.5)
        idle = sampler.settle(at_most=IDLE_WORKER_HOST, within_s=30)
    finally:
        sampler.close()
        worker.stop()
        model.kill()
        model.wait(5)
    print(f"worker host: {WORKER_RUNS} runs, at most {most['running']} running at once, "
          f"peak {sampler.peak} sessions (max {worker_host_sessions_max()}), idle {idle}")
    statuses = set(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == {"succeeded"}, (statuses, worker.log_path.read_text()[-3000:])
    assert most["running"] >= 60, f"only {most['running']} runs were in flight at once"
    assert 0 < sampler.peak <= worker_host_sessions_max()
    assert idle <= IDLE_WORKER_HOST
