"""replica_pages: a console list page read from a streaming standby, as a real daphne serves it.

Starts a primary and its streaming standby of their own (tests/replica_cluster.py), migrates
the primary and seeds BENCH_RUNS (200) runs, signs one operator in, then starts
``daphne agentops.asgi:application`` (AGENTOPS_DEBUG=0, AGENTOPS_REPLICA_URL on the standby)
from each code tree named on the command line in turn, alternating, BENCH_ROUNDS (3) times:
per round and tree, BENCH_PAGES (200) sequential GETs of the queue's All tab (a read page:
agentops.replica sends its lists to the standby), after BENCH_WARMUPS (10). It reports the
page time (client side, median and p95), and the sessions the standby established meanwhile
(``pg_stat_database.sessions`` from before daphne starts to after it exits, warm-ups
included: one per page when the standby's connections are not pooled). The commit floor of BENCH_ENGINE_DATABASE_URL's server and the
load average are beside them.

    flock /tmp/agentops-bench.lock python bench/replica_pages.py /tmp/main_copy .
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import commit_floor, emit, log  # noqa: E402
from tests.replica_cluster import Pair, free_port  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PAGES = int(os.environ.get("BENCH_PAGES", "200"))
WARMUPS = int(os.environ.get("BENCH_WARMUPS", "10"))
SECRET = "bench-replica-pages-" + "k" * 40
FLOOR_URL = os.environ.get("BENCH_ENGINE_DATABASE_URL",
                           "postgres://postgres@127.0.0.1:5432/agentops_bench_engine")


def _boot(pair: Pair) -> str:
    """Point this process's Django at the pair's primary, migrate, seed; return a cookie."""
    os.environ.update(DATABASE_URL=pair.url("primary"), DJANGO_SETTINGS_MODULE="agentops.settings",
                      AGENTOPS_DEBUG="0", SECRET_KEY=SECRET)
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client

    from approvals.roles import OPERATOR
    from runs.services import run_start

    call_command("migrate", verbosity=0, interactive=False)
    for i in range(RUNS):
        run_start(agent="support-returns", goal=f"bench page {i}", input={})
    user = User.objects.create_user(username="bench-reader", password="pw-bench-only")
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def _daphne(root: Path, pair: Pair, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(root), "DATABASE_URL": pair.url("primary"),
           "AGENTOPS_REPLICA_URL": pair.url("standby"), "AGENTOPS_DEBUG": "0",
           "SECRET_KEY": SECRET, "ALLOWED_HOSTS": "127.0.0.1", "AGENTOPS_SSL_REDIRECT": "0",
           "AGENTOPS_STATIC_FINDERS": "1", "LOG_LEVEL": "ERROR"}
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "agentops.asgi:application"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"daphne from {root} did not listen on {port}")


def _get(url: str, cookie: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Cookie": cookie}),
                                timeout=60) as response:
        body = response.read()
    if response.status != 200 or b"bench page" not in body:
        raise RuntimeError(f"{url}: {response.status}, the seeded runs are not listed")
    return (time.perf_counter() - started) * 1000


def _standby_sessions(pair: Pair) -> int:
    return pair.sql("standby", "SELECT sessions FROM pg_stat_database "
                               "WHERE datname = current_database()")[0][0]


def _round(root: Path, pair: Pair, cookie: str) -> dict:
    """Serve the pages from daphne started from ``root``; return its figures."""
    port = free_port()
    proc = _daphne(root, pair, port)
    url = f"http://127.0.0.1:{port}/?tab=all"
    before = _standby_sessions(pair)
    try:
        for _ in range(WARMUPS):
            _get(url, cookie)
        times = sorted(_get(url, cookie) for _ in range(PAGES))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    time.sleep(0.5)  # a backend's counters reach pg_stat_database when it exits
    return {"root": str(root), "median_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
            "standby_sessions_opened": _standby_sessions(pair) - before - 1}


def main(roots: list[Path]) -> None:
    """Alternate the code trees ``roots`` over ROUNDS rounds on one pair; emit the figures."""
    pair = Pair().start()
    try:
        pair.synchronous()
        cookie = _boot(pair)
        floor = commit_floor(conninfo=FLOOR_URL)
        load = os.getloadavg()[0]
        rounds = []
        for n in range(ROUNDS):
            for root in roots:
                rounds.append(_round(root, pair, cookie))
                log(f"replica_pages: round {n}: {rounds[-1]}")
        by_root = {str(r): statistics.median(x["median_ms"] for x in rounds
                                             if x["root"] == str(r)) for r in roots}
        emit("replica_pages", {"runs": RUNS, "pages": PAGES, "rounds": rounds,
                               "median_of_medians_ms": by_root,
                               "commit_floor_per_s": round(floor),
                               "load_avg": [round(load, 2), round(os.getloadavg()[0], 2)]})
    finally:
        pair.stop()


if __name__ == "__main__":
    main([Path(a).resolve() for a in sys.argv[1:]] or [ROOT])
