"""What every benchmark shares: the bench database, Django boot, timing and PostgreSQL counters.

Each benchmark script prints exactly ONE JSON line on stdout (``emit``); anything else goes to
stderr, so ``run_all.py`` can read the figures from the last stdout line.
"""
from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/agentops_bench"


def engine_env(*, in_process: bool) -> None:
    """Set the environment of an engine benchmark (before Django starts).

    The engine benchmarks get their own database: the console seed's 100k runs would give
    the workers (and the sweeper) other work and blur the figures. ``in_process``
    benchmarks tick runs themselves, so nothing is queued and a tick never yields.
    """
    os.environ.setdefault("AGENTOPS_AGENTS", "bench.agents")
    os.environ["BENCH_DATABASE_URL"] = os.environ.get(
        "BENCH_ENGINE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentops_bench_engine")
    if in_process:
        os.environ.setdefault("AGENTOPS_ENQUEUE_TICKS", "0")
        os.environ.setdefault("AGENTOPS_TICK_SLICE_S", "600")


def bench_url() -> str:
    """Return the URL of the bench database (env BENCH_DATABASE_URL)."""
    return os.environ.get("BENCH_DATABASE_URL") or DEFAULT_URL


def bench_scale() -> float:
    """Return the seed scale factor (env BENCH_SCALE, 1.0 = 100k runs and 2M events)."""
    raw = os.environ.get("BENCH_SCALE") or "1"
    scale = float(raw)
    if not 0 < scale <= 10:
        raise ValueError(f"BENCH_SCALE must be in (0, 10], got {raw!r}")
    return scale


def maintenance_url(url: str) -> tuple[str, str]:
    """Return (the URL of the server's ``postgres`` database, the database name ``url`` names)."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name:
        raise ValueError(f"BENCH_DATABASE_URL names no database: {url!r}")
    return urlunsplit(parts._replace(path="/postgres")), name


def db_ensure(url: str) -> bool:
    """Create the database ``url`` names if it is missing; return True when it was created."""
    import psycopg
    from psycopg import sql

    admin_url, name = maintenance_url(url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return False
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return True


def db_url_suffixed(url: str, suffix: str) -> str:
    """Return ``url`` with ``suffix`` appended to its database name (a peer's own database)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path + suffix))


def db_fresh(url: str) -> None:
    """Drop and recreate the database ``url`` names, so every pass starts from empty tables."""
    import psycopg
    from psycopg import sql

    admin, name = maintenance_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                     .format(sql.Identifier(name)))
    db_ensure(url)


def django_boot(*, migrate: bool = True) -> str:
    """Point Django at the bench database (creating and migrating it) and set it up."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    url = bench_url()
    db_ensure(url)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
    os.environ.setdefault("AGENTOPS_DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
    return url


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """Return n, mean, min, p50 (= median), p95, p99 and max of ``samples`` (nearest rank)."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    return {
        "n": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 3),
        "min": round(ordered[0], 3),
        "p50": round(rank(50), 3),
        "p95": round(rank(95), 3),
        "p99": round(rank(99), 3),
        "max": round(ordered[-1], 3),
    }


def median(samples: Sequence[float]) -> float:
    """Return the median (p50) of ``samples``."""
    return percentiles(samples)["p50"]


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """Time the block; the yielded dict holds ``s`` and ``ms`` once it exits."""
    out: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield out
    finally:
        out["s"] = time.perf_counter() - start
        out["ms"] = out["s"] * 1000


def peak_rss_mb(*, children: bool = False) -> float:
    """Return the peak resident set size of this process (or its waited-for children) in MiB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux reports KiB


def commit_floor(n: int = 500, **connect: Any) -> float:
    """Return raw psycopg commits/s (one INSERT + COMMIT each): the floor of a durable step.

    ``connect`` goes to ``psycopg.connect`` (``conninfo=`` a URL, or keyword parameters).
    """
    import psycopg

    with psycopg.connect(**connect) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (x int)")
        conn.commit()
        start = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO bench_floor VALUES (%s)", [i])
            conn.commit()
        elapsed = time.perf_counter() - start
        conn.execute("DROP TABLE bench_floor")
        conn.commit()
    return n / elapsed


def pg_counters() -> dict[str, Any]:
    """Return the cluster's WAL position and the bench database's commit count, now.

    Flushes this backend's statistics first. Other processes' statistics reach
    pg_stat_database when they go idle (PostgreSQL 15+: within ~1 s, at most 10 s) or exit, so
    a multi-process benchmark should let workers exit or wait before the closing read. The WAL
    position is cluster-wide: on a shared server it includes everyone's writes.
    """
    from django.db import connection

    with connection.cursor() as cur:
        if connection.pg_version >= 150000:
            cur.execute("SELECT pg_stat_force_next_flush()")
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            "SELECT pg_current_wal_lsn()::text, xact_commit, active_time FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
        lsn, commits, active_ms = cur.fetchone()
    return {"lsn": lsn, "commits": int(commits), "active_ms": float(active_ms or 0)}


def pg_delta(before: dict[str, Any]) -> dict[str, Any]:
    """Return WAL bytes, commits and server time since ``before`` (a ``pg_counters()`` result).

    The commits include the one that reads the counters. ``server_ms`` is the database's
    ``active_time``: milliseconds its backends spent executing statements (commits' WAL flush
    included), as flushed so far — this backend's is flushed by ``pg_counters``.
    """
    from django.db import connection

    after = pg_counters()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", [after["lsn"], before["lsn"]])
        wal = int(cur.fetchone()[0])
    return {"wal_bytes": wal, "commits": after["commits"] - before["commits"],
            "server_ms": after["active_ms"] - before["active_ms"]}


class RoundTrips:
    """Count psycopg round trips (and the time spent waiting on them) in this process.

    Every psycopg 3 operation that talks to the server (execute, fetch from the server,
    commit, a pipeline sync) runs as one generator driven by ``Connection.wait``; the ones
    that wait on the socket at least once are counted (setting ``autocommit`` outside a
    transaction does not). psycopg sends an implicit BEGIN inside the first statement's
    wait, so a transaction's BEGIN is not counted apart. ``start()`` wraps ``wait``;
    ``take()`` returns (round trips, seconds waited) since the last take; ``stop()`` unwraps.
    """

    def __init__(self) -> None:
        self.n = 0
        self.s = 0.0
        self._real: Any = None
        self._units_real: Any = None

    def start(self) -> "RoundTrips":
        import psycopg

        real = self._real = psycopg.Connection.wait
        counter = self

        def wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return real(conn, counter._watched(gen), *args, **kwargs)
            finally:
                counter.s += time.perf_counter() - t

        psycopg.Connection.wait = wait  # type: ignore[method-assign]
        self._units_watched()
        return self

    def _units_watched(self) -> None:
        """Also count the engine's units in flight (runs.engine.runtime.unit_overlap): they go
        through libpq's asynchronous calls, not ``Connection.wait``. A unit sent is one round
        trip; the time its reader waits for the result is time waited on the server."""
        try:
            from runs.engine.runtime import unit_overlap
        except ImportError:  # a peer's process: no engine here
            return
        counter = self
        real_send, real_results = unit_overlap.unit_send, unit_overlap._results

        def unit_send(*args: Any, **kwargs: Any) -> Any:
            counter.n += 1
            return real_send(*args, **kwargs)

        def results(pg: Any) -> Any:
            t = time.perf_counter()
            try:
                return real_results(pg)
            finally:
                counter.s += time.perf_counter() - t

        unit_overlap.unit_send, unit_overlap._results = unit_send, results
        self._units_real = (real_send, real_results)

    def _watched(self, gen: Any) -> Any:
        """Drive ``gen`` unchanged, counting one round trip if it waits on the socket."""
        try:
            ready = next(gen)
        except StopIteration as done:
            return done.value
        self.n += 1
        while True:
            sent = yield ready
            try:
                ready = gen.send(sent)
            except StopIteration as done:
                return done.value

    def take(self) -> tuple[int, float]:
        out = (self.n, self.s)
        self.n, self.s = 0, 0.0
        return out

    def stop(self) -> None:
        import psycopg

        if self._real is not None:
            psycopg.Connection.wait = self._real  # type: ignore[method-assign]
            self._real = None
        if self._units_real is not None:
            from runs.engine.runtime import unit_overlap

            unit_overlap.unit_send, unit_overlap._results = self._units_real
            self._units_real = None


def pg_version_text() -> str:
    """Return the server's version string (e.g. "15.20"), or "unavailable"."""
    import psycopg

    try:
        with psycopg.connect(maintenance_url(bench_url())[0], connect_timeout=3) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]
    except psycopg.Error:
        return "unavailable"


def log(message: str) -> None:
    """Write a progress line to stderr (stdout is reserved for the one JSON line)."""
    print(message, file=sys.stderr, flush=True)


def emit(bench: str, figures: dict[str, Any]) -> None:
    """Print the benchmark's one JSON line of figures on stdout."""
    line = {"bench": bench, "peak_rss_mb": peak_rss_mb(), **figures}
    sys.stdout.write(json.dumps(line, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
