"""A production-configured daphne holds at most its pool's sessions, whatever the burst.

Bursts of 40 concurrent ``GET /api/runs`` against a real ``daphne agentops.asgi:application``
(AGENTOPS_DEBUG=0, PostgreSQL). A sampler counts the daphne process's sessions in
pg_stat_activity (they are named ``host:pid``) every few milliseconds meanwhile.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.e2e.test_cold_start import _free_port, _wait_listening
from tests.e2e.workers import ROOT, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONCURRENCY, BURSTS = 40, 5
WEB_MAX = 20  # the default AGENTOPS_WEB_DB_POOL_MAX


def _db_url() -> str:
    return worker_env()["DATABASE_URL"]


class SessionSampler:
    """Count one process's PostgreSQL sessions every ``every_s`` on a thread; keep the peak."""

    def __init__(self, pid: int, every_s: float = 0.02) -> None:
        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()
        self._conn = psycopg.connect(_db_url(), autocommit=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def count(self) -> int:
        """Return the process's sessions now."""
        return self._conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
            [f"%:{self.pid}"]).fetchone()[0]

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
        env=worker_env(AGENTOPS_DEBUG="0", SECRET_KEY="budget-test-" + "k" * 40,
                       ALLOWED_HOSTS="127.0.0.1", AGENTOPS_SSL_REDIRECT="0", **env),
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
        sampler = SessionSampler(proc.pid)
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
