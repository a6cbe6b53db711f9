"""capacity: what one model step costs PostgreSQL and a worker host, for the capacity model.

density.py's workload and machinery (bench.model_server sleeping L seconds a call, reached
through the real ``openai`` client; ONE ``agentops worker`` host with default settings; N
``bench-remote`` runs of S tool steps and a closing reply), measured per model step over the
busy window (the runs created, their ticks enqueued, until the last ends and the host exits):

- commits: ``xact_commit`` of the bench database (read-only transactions included), less the
  bench's own watching statements; write commits and WAL bytes of this database from the WAL
  (pg_walinspect, as engine_throughput.py reads them); the cluster's WAL position as well;
- PostgreSQL server CPU: user + system CPU from ``/proc/<pid>/stat`` of the backends serving
  this database (the host's sessions, its lease keepers, autovacuum on it; sampled twice a
  second from pg_stat_activity by a thread on the maintenance database, so the sampling
  costs the bench database nothing), and beside it ``pg_stat_database.active_time`` (time
  executing statements: a proxy that counts waits too). The cluster's background processes
  (walwriter, checkpointer, background writer) are reported apart: others' writes load them;
- worker host CPU ms per step, its PostgreSQL sessions (peak, and per run in flight), idle
  RSS and MB per run in flight (density.py's sampling);
- database growth per step (``pg_database_size``) and a run's start (``run_start``: commits,
  WAL, growth), which the model spreads over the run's steps;
- the machine, in the same window: the raw one-session commit floor (bench/_common.py),
  the commit ceiling with BENCH_CEILING_SESSIONS (8) sessions committing at once (group
  commit), and the sustained WAL write rate of one session writing 1 KB rows in 2 MB commits.

Load-insensitive (per unit of work): commits, write commits, WAL bytes, growth and sessions
per step, MB per run. Load-sensitive: CPU ms per step (a loaded machine adds cache misses and
scheduling), the floor, the ceiling and the WAL rate (the disk and CPU are shared).

``--machine`` measures only the floor, ceiling and WAL rate: run it on (or next to) the
server you plan for, then ``python bench/capacity_model.py --ceiling X --wal-mb-s Y``.

Env: BENCH_RUNS (500), BENCH_DELAY_S (5), BENCH_STEPS (20), BENCH_CEILING_SESSIONS (8),
BENCH_CEILING_S (3: seconds of the ceiling's commits), BENCH_WAL_COMMITS (16 of 2 MB),
BENCH_CAPACITY_DATABASE_URL (agentops_bench_capacity), BENCH_WORKER_LOG.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ["BENCH_ENGINE_DATABASE_URL"] = os.environ.get(
    "BENCH_CAPACITY_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentops_bench_capacity")
os.environ.setdefault("BENCH_RUNS", "500")
os.environ.setdefault("BENCH_DELAY_S", "5")
os.environ.setdefault("BENCH_STEPS", "20")

from bench import density  # noqa: E402  (sets the engine bench's environment)
from bench._common import (bench_url, commit_floor, django_boot, emit, log,  # noqa: E402
                           maintenance_url, pg_counters, pg_delta)
from bench.engine_throughput import _flush_lsn, _wal_of_this_database  # noqa: E402
from bench.model_server import model_server_start  # noqa: E402

SESSIONS = int(os.environ.get("BENCH_CEILING_SESSIONS", "8"))
CEILING_S = float(os.environ.get("BENCH_CEILING_S", "3"))
WAL_COMMITS = int(os.environ.get("BENCH_WAL_COMMITS", "16"))
_BACKGROUND = ("walwriter", "checkpointer", "background writer")


def _proc_cpu_s(pid: int) -> float | None:
    """Return a process's user + system CPU seconds so far (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServerCpu:
    """Sample the CPU of the PostgreSQL processes serving the bench database, from a thread.

    Each pid's CPU at its first sample is its baseline (0 for a backend born after the
    first round: its whole life is the bench's); its last sample is kept, so a backend that
    exits between two samples loses at most half a second of CPU.
    """

    def __init__(self, name: str, observer_pid: int) -> None:
        self.name, self.observer = name, observer_pid
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self.peak_sessions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> ServerCpu:
        import psycopg

        self._conn = psycopg.connect(maintenance_url(bench_url())[0], autocommit=True)
        self._sample(initial=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample(initial=False)

    def _sample(self, *, initial: bool) -> None:
        rows = self._conn.execute(
            "SELECT pid, datname, backend_type FROM pg_stat_activity "
            "WHERE (datname = %s AND pid <> %s) OR backend_type = ANY(%s)",
            [self.name, self.observer, list(_BACKGROUND)]).fetchall()
        self.peak_sessions = max(self.peak_sessions, sum(1 for r in rows if r[1]))
        for pid, datname, _kind in rows:
            cpu = _proc_cpu_s(pid)
            if cpu is None:
                continue
            self.first.setdefault(pid, cpu if initial or datname is None else 0.0)
            self.last[pid] = cpu
            self.kind[pid] = "ours" if datname else "background"

    def stop(self) -> dict[str, float]:
        """Stop sampling; return CPU seconds of our backends and of the background processes."""
        self._sample(initial=False)
        self._stop.set()
        self._thread.join()
        self._conn.close()
        out = {"ours": 0.0, "background": 0.0}
        for pid, cpu in self.last.items():
            out[self.kind[pid]] += cpu - self.first[pid]
        return out


class Watching:
    """Count the bench's own statements on the bench database (each one a transaction in
    autocommit), so they can be taken off ``xact_commit``. Ticks enqueued are the runs' own."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        if "django_q_ormq" not in sql:
            self.n += 1
        return execute(sql, params, many, context)


def _db_size() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        return int(cur.fetchone()[0])


def _wal_kept():
    """Open a session holding a temporary physical replication slot: the server keeps the
    WAL from now on (a busy window outlives a checkpoint's recycling, and pg_walinspect
    reads it afterwards); the slot goes when the session closes, even if the bench dies."""
    import psycopg

    conn = psycopg.connect(maintenance_url(bench_url())[0], autocommit=True)
    conn.execute("SELECT pg_create_physical_replication_slot(%s, true, true)",
                 [f"agentops_capacity_{os.getpid()}"])
    return conn


def _run_updates() -> tuple[int, int]:
    """Return the run table's row updates so far, and how many of them were HOT (no index
    entry written)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                    "WHERE relname = 'runs_run'")
        return tuple(cur.fetchone())


def _window_open(watching: Watching) -> dict:
    from django.db import connection

    kept = _wal_kept()
    with connection.execute_wrapper(watching):
        return {"pg": pg_counters(), "lsn": _flush_lsn(), "size": _db_size(), "kept": kept,
                "updates": _run_updates()}


def _window_close(opened: dict, watching: Watching) -> dict:
    """Return commits (less the bench's own statements), write commits, WAL bytes (ours and
    the cluster's) and growth since ``opened``."""
    from django.db import connection

    with connection.execute_wrapper(watching):
        delta = pg_delta(opened["pg"])
        updates = [b - a for a, b in zip(opened["updates"], _run_updates())]
    end = _flush_lsn()
    ours = _wal_of_this_database(opened["lsn"], end)
    by_relation = wal_by_relation(opened["lsn"], end) if ours["bytes"] is not None else []
    opened["kept"].close()
    return {**delta, "commits": delta["commits"] - watching.n, "by_relation": by_relation,
            "run_updates": updates,
            "write_commits": ours["commits"], "our_wal_bytes": ours["bytes"],
            "growth_bytes": _db_size() - opened["size"]}


_WAL_BY_RELATION = """
WITH rec AS (SELECT record_length, fpi_length,
                    split_part(split_part(split_part(block_ref, 'rel ', 2), ' ', 1), '/', 3)
                      AS node
             FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
             WHERE block_ref LIKE %(ours)s)
SELECT coalesce(c.relname, rec.node), sum(record_length), sum(fpi_length)
FROM rec LEFT JOIN pg_class c ON c.relfilenode::text = rec.node
GROUP BY 1 ORDER BY 2 DESC
"""


def wal_by_relation(start: str, end: str) -> list[tuple[str, int, int]]:
    """Return (relation, WAL bytes, of which full-page images) of the bench database's
    records between two LSNs, each record counted under its first block's relation."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        ours = f"blkref #0: rel %/{cur.fetchone()[0]}/%"
        cur.execute(_WAL_BY_RELATION, {"start": start, "end": end, "ours": ours})
        return [(name, int(wal), int(fpi)) for name, wal, fpi in cur.fetchall()]


def _runs_created() -> tuple[list, dict]:
    """Create the runs (ticks not yet enqueued); return them and what starting one cost."""
    watching = Watching()
    opened = _window_open(watching)
    ids = density._create_runs()
    cost = _window_close(opened, watching)
    n = len(ids)
    return ids, {"commits": round(cost["commits"] / n, 2),
                 "write_commits": round(cost["write_commits"] / n, 2),
                 "wal_bytes": round(cost["our_wal_bytes"] / n),
                 "db_growth_bytes": round(cost["growth_bytes"] / n)}


def _pass() -> dict:
    """One worker host works the runs; return the busy window's totals and the host's peaks."""
    from django.db import connection

    server, url = model_server_start(density.DELAY_S, density.STEPS)
    host = density._worker(url)
    try:
        density._wait_up(host.pid)
        idle_mb = density._rss_mb(density._group(host.pid))
        ids, start = _runs_created()
        log(f"capacity: {len(ids)} runs created, host idle {idle_mb:.0f} MB; model "
            f"{density.DELAY_S}s x {density.STEPS + 1} calls a run")
        connection.ensure_connection()
        cpu = ServerCpu(maintenance_url(bench_url())[1],
                        connection.connection.info.backend_pid).start()
        watching = Watching()
        opened = _window_open(watching)
        with connection.execute_wrapper(watching):
            peak = density._watch(ids, host.pid, idle_mb)
    finally:
        os.killpg(host.pid, 15)
        host.wait(30)
        server.kill()
    time.sleep(1.5)  # the host's sessions end and their counters reach pg_stat_database
    server_cpu = cpu.stop()
    return {"ids": ids, "start": start, "idle_mb": idle_mb, "peak": peak,
            "window": _window_close(opened, watching), "server_cpu_s": server_cpu,
            "sessions": cpu.peak_sessions, "steps": density._steps(ids, density.DELAY_S),
            "recoveries": density._recoveries(ids)}


def commit_ceiling(sessions: int, seconds: float = 3.0) -> float:
    """Return commits/s of ``sessions`` connections each committing one-row INSERTs at once
    (group commit lets one WAL flush carry several): the server's commit ceiling, roughly."""
    import psycopg

    with psycopg.connect(bench_url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_ceiling (x int)")
    counts = [0] * sessions
    go = threading.Barrier(sessions + 1)

    def commit_loop(i: int) -> None:
        with psycopg.connect(bench_url(), autocommit=True) as conn:
            go.wait()
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                conn.execute("INSERT INTO bench_ceiling VALUES (%s)", [i])
                counts[i] += 1

    threads = [threading.Thread(target=commit_loop, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    go.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    with psycopg.connect(bench_url(), autocommit=True) as conn:
        conn.execute("DROP TABLE bench_ceiling")
    return sum(counts) / elapsed


def wal_rate(commits: int = 16) -> float:
    """Return the WAL MB/s one session sustains writing 2,000 rows of 1 KB per commit."""
    import psycopg

    with psycopg.connect(bench_url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_walrate (x text)")
        lsn0 = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        start = time.perf_counter()
        for i in range(commits):
            conn.execute("INSERT INTO bench_walrate SELECT repeat(md5(%s || g::text), 32) "
                         "FROM generate_series(1, 2000) g", [str(i)])
        elapsed = time.perf_counter() - start
        wal = conn.execute("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", [lsn0]).fetchone()[0]
        conn.execute("DROP TABLE bench_walrate")
    return float(wal) / 1e6 / elapsed


def machine() -> dict:
    """Return the machine's one-session commit floor, commit ceiling and WAL rate, now."""
    return {"commit_floor_per_s": round(commit_floor(conninfo=bench_url())),
            "commit_ceiling_per_s": round(commit_ceiling(SESSIONS, CEILING_S)),
            "ceiling_sessions": SESSIONS, "wal_mb_per_s": round(wal_rate(WAL_COMMITS), 1),
            "load_avg": round(os.getloadavg()[0], 2)}


def _figures(got: dict, before: dict, after: dict) -> dict:
    """Return the JSON line: per-step costs, the host's figures, the machine beside them."""
    steps, window, peak = got["steps"]["model_calls"], got["window"], got["peak"]
    from django.conf import settings

    return {
        "runs": len(got["ids"]), "delay_s": density.DELAY_S,
        "steps_per_run": density.STEPS + 1, "steps": steps, "ended": peak["ended"],
        "recoveries": got["recoveries"], "wall_s": round(peak["wall_s"], 1),
        "steps_per_s_mid": got["steps"]["steps_per_s_mid"],
        "n_over_l": len(got["ids"]) / density.DELAY_S,
        "commits_per_step": round(window["commits"] / steps, 3),
        "write_commits_per_step": _per(window["write_commits"], steps, 3),
        "wal_bytes_per_step": _per(window["our_wal_bytes"], steps, 0),
        "cluster_wal_bytes_per_step": round(window["wal_bytes"] / steps),
        "wal_by_relation_per_step": {name: [round(wal / steps), round(fpi / steps)]
                                     for name, wal, fpi in window["by_relation"][:8]},
        "fpi_share_of_wal": round(sum(r[2] for r in window["by_relation"])
                                  / max(1, sum(r[1] for r in window["by_relation"])), 3),
        "db_growth_bytes_per_step": round(window["growth_bytes"] / steps),
        "run_row_updates_per_step": round(window["run_updates"][0] / steps, 2),
        "run_row_hot_share": round(window["run_updates"][1] / max(1, window["run_updates"][0]),
                                   3),
        "server_cpu_ms_per_step": round(1000 * got["server_cpu_s"]["ours"] / steps, 3),
        "server_background_cpu_ms_per_step": round(
            1000 * got["server_cpu_s"]["background"] / steps, 3),
        "server_active_ms_per_step": round(window["server_ms"] / steps, 3),
        "server_active_ms_per_commit": round(window["server_ms"] / max(1, window["commits"]), 3),
        "worker_cpu_ms_per_step": round(1000 * sum(peak["cpu_s"].values()) / steps, 3),
        "run_start": got["start"],
        "peak_in_flight": peak["in_flight"], "host_workers": settings.Q_CLUSTER["workers"],
        "host_sessions_peak": got["sessions"],
        "sessions_per_run_in_flight": round(got["sessions"] / max(1, peak["in_flight"]), 4),
        "rss_idle_mb": round(got["idle_mb"], 1),
        "mb_per_in_flight_run": round((peak["rss_at_peak_mb"] - got["idle_mb"])
                                      / max(1, peak["in_flight"]), 3),
        "machine": _machine_pair(before, after),
        "db": maintenance_url(bench_url())[1],
    }


def _per(value: int | None, steps: int, digits: int) -> float | None:
    return None if value is None else round(value / steps, digits or None)


def _machine_pair(before: dict, after: dict) -> dict:
    """The machine's figures before and after the pass; the model uses their means."""
    out = {"before": before, "after": after}
    for key in ("commit_floor_per_s", "commit_ceiling_per_s", "wal_mb_per_s"):
        out[key] = round((before[key] + after[key]) / 2, 1)
    return out


def main() -> None:
    django_boot()
    if "--machine" in sys.argv[1:]:
        emit("capacity_machine", machine())
        return
    density._clean()
    before = machine()
    log(f"capacity: machine before {before}")
    got = _pass()
    after = machine()
    log(f"capacity: machine after {after}")
    emit("capacity", _figures(got, before, after))


if __name__ == "__main__":
    main()
