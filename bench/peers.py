"""peers: the same no-op durable-step workload on DBOS and on LangGraph, side by side.

A step is one durably recorded no-op: a ``@DBOS.step()`` inside a ``@DBOS.workflow()``, or one
LangGraph superstep of a node that loops on itself through a conditional edge, checkpointed
by ``PostgresSaver`` with ``durability="sync"``. Each peer runs BENCH_PEER_STEPS steps
(default 1000) split over BENCH_PEER_RUNS workflows / threads (default 10), sequentially, on
its own database of the same local PostgreSQL, in BENCH_PEER_ROUNDS rounds (default 3; the
peers take turns, so a change of load hits both); the raw psycopg floor (one INSERT + COMMIT)
is measured in the same run, before and after. Commits per step are the database's
``pg_stat_database.xact_commit`` delta over the peer's whole session (connections closed, so
every backend has flushed its statistics), less that of an empty session (launch, no steps):
read-only transactions count too, as in engine_throughput (DBOS's default pool pings each
checkout with an autocommit ``SELECT 1``). Write commits per step are the COMMIT records in
the WAL of transactions that wrote to the peer's database (pg_walinspect), i.e. the commits
that flush WAL: the figures issue 9 quotes. WAL bytes per step are those transactions' records.
Per-step counts are the median round's.
Step times are the intervals between consecutive step returns, so each holds one full step.

Needs the ``peers`` extra (``pip install -e '.[peers]'``); without it the line says skipped.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (RoundTrips, commit_floor, db_fresh, db_url_suffixed, emit, log,
                           maintenance_url, percentiles)

STEPS = int(os.environ.get("BENCH_PEER_STEPS", "1000"))
RUNS = int(os.environ.get("BENCH_PEER_RUNS", "10"))
ROUNDS = int(os.environ.get("BENCH_PEER_ROUNDS", "3"))
BASE_URL = os.environ.get("BENCH_PEERS_DATABASE_URL",
                          "postgres://postgres@127.0.0.1:5432/agentops_bench_peers")
SKIP_REASON = "pip install -e '.[peers]' to measure DBOS and LangGraph side by side"
PEER_MODULES = ("dbos", "langgraph", "langgraph.checkpoint.postgres")
PACKAGES = ("dbos", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres",
            "psycopg", "sqlalchemy")
# Issue 9's figures (2 cores, PostgreSQL 15, fsync on), for reading this run's beside them.
REFERENCE = {"floor_commits_per_s": 3048,
             "dbos": {"version": "3.4", "steps_per_s": 582, "write_commits_per_step": 1.02},
             "langgraph": {"version": "1.2", "steps_per_s": 786,
                           "write_commits_per_step": 2.03}}

# A session runs ``runs`` workflows of ``per_run`` steps; it returns (seconds, step seconds).
Session = Callable[[int, int], tuple[float, list[float]]]


def _missing_peers() -> list[str]:
    """Return the peer modules that cannot be imported here."""
    missing = []
    for name in PEER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ModuleNotFoundError, ValueError):  # ValueError: sys.modules holds None
            found = False
        if not found:
            missing.append(name)
    return missing




def _counters(url: str, *, settle_s: float = 10.0) -> dict[str, Any]:
    """Return ``url``'s database oid, its commit count and the flushed WAL position, once idle.

    Backends flush their statistics when they exit, so waiting for the peer's connections to be
    gone makes the commit count exact; reading from the maintenance database adds nothing to it.
    """
    import psycopg

    admin, name = maintenance_url(url)
    deadline = time.monotonic() + settle_s
    with psycopg.connect(admin, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                           [name]).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        oid, commits, lsn, active_ms = conn.execute(
            "SELECT datid, xact_commit, pg_current_wal_flush_lsn()::text, active_time "
            "FROM pg_stat_database WHERE datname = %s", [name]).fetchone()
    return {"oid": int(oid), "commits": int(commits), "lsn": lsn,
            "active_ms": float(active_ms or 0)}


# The commits (and their WAL) of transactions that wrote a block of one database, read from the
# WAL itself: exact for that database, whatever else the server is doing.
_WAL_WRITES = """
WITH rec AS (SELECT xid::text::bigint AS x, resource_manager, record_type, record_length,
                    block_ref
             FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)),
     ours AS (SELECT DISTINCT x FROM rec WHERE x <> 0 AND block_ref ~ %(rel)s)
SELECT count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%%'),
       coalesce(sum(record_length), 0)
FROM rec JOIN ours USING (x)
"""


def _wal_writes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int | None]:
    """Return the write commits and WAL bytes of one database between two ``_counters``.

    ``xact_commit`` also counts read-only transactions (pings, SELECTs in autocommit); these
    are the commits that flush WAL, the ones issue 9 counts. None when pg_walinspect is not
    there (or the WAL was recycled meanwhile).
    """
    import psycopg

    if before["lsn"] == after["lsn"]:  # no WAL at all (pg_walinspect refuses an empty range)
        return {"writes": 0, "wal": 0}
    params = {"start": before["lsn"], "end": after["lsn"], "rel": rf"rel \d+/{after['oid']}/"}
    try:
        with psycopg.connect(db_url_suffixed(BASE_URL, "_floor"), autocommit=True) as conn:
            commits, wal = conn.execute(_WAL_WRITES, params).fetchone()
    except psycopg.Error as exc:
        log(f"peers: no WAL figures ({str(exc).strip()})")
        return {"writes": None, "wal": None}
    return {"writes": int(commits), "wal": int(wal)}


def _delta(url: str, session: Session, runs: int, per_run: int) -> dict[str, Any]:
    """Run one session between counter reads; return its time, step times and counts."""
    before = _counters(url)
    _TRIPS.take()
    cpu = time.process_time()
    elapsed, step_s = session(runs, per_run)
    cpu = time.process_time() - cpu
    trips, waited = _TRIPS.take()
    after = _counters(url)
    return {"elapsed": elapsed, "step_s": step_s, "cpu_ms": cpu * 1000,
            "commits": after["commits"] - before["commits"], "trips": trips,
            "waited_ms": waited * 1000, "server_ms": after["active_ms"] - before["active_ms"],
            **_wal_writes(before, after)}


_TRIPS = RoundTrips()


def _walinspect_install(url: str) -> None:
    """Create pg_walinspect in the floor database (where the WAL queries run), if it can be."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except psycopg.Error as exc:
        log(f"peers: pg_walinspect unavailable, no write-commit figures ({str(exc).strip()})")


def _floor(url: str) -> float:
    """Return raw psycopg commits/s (one INSERT + COMMIT each) on ``url``."""
    return commit_floor(conninfo=url)


def _per_step(rounds: list[dict[str, Any]], empty: dict[str, Any], key: str,
              steps: int) -> float | None:
    """Return the median round's ``key`` per step, net of the empty session."""
    values = sorted(r[key] for r in rounds if r[key] is not None)
    if not values or empty[key] is None:
        return None
    return (values[len(values) // 2] - empty[key]) / steps


def _summary(name: str, rounds: list[dict[str, Any]], empty: dict[str, Any]) -> dict[str, Any]:
    """Return a peer's figures from its timed rounds (the median round), net of the empty one."""
    steps = len(rounds[0]["step_s"])
    rates = sorted(steps / r["elapsed"] for r in rounds)
    per_step = {k: _per_step(rounds, empty, k, steps)
                for k in ("commits", "writes", "wal", "trips", "server_ms", "waited_ms", "cpu_ms")}
    figures = {"steps": steps, "rounds": len(rounds),
               "steps_per_s": round(rates[len(rates) // 2], 1),
               "steps_per_s_rounds": [round(x, 1) for x in rates],
               "step_ms": percentiles([s * 1000 for r in rounds for s in r["step_s"]]),
               "commits_per_step": round(per_step["commits"], 2),
               "write_commits_per_step": _round(per_step["writes"], 2),
               "wal_bytes_per_step": _round(per_step["wal"], None),
               "round_trips_per_step": _round(per_step["trips"], 2),
               "server_ms_per_step": _round(per_step["server_ms"], 3),
               "db_wait_ms_per_step": _round(per_step["waited_ms"], 3),
               "cpu_ms_per_step": _round(per_step["cpu_ms"], 3),
               "empty_session": {k: empty[k] for k in ("commits", "writes", "wal")}}
    log(f"{name}: {figures['steps_per_s']} steps/s {figures['steps_per_s_rounds']}, "
        f"{figures['commits_per_step']} commits/step, "
        f"{figures['write_commits_per_step']} write commits/step")
    return figures


def _round(value: float | None, digits: int | None) -> float | None:
    return None if value is None else round(value, digits)


def _measure(peers: dict[str, tuple[str, Session]]) -> dict[str, dict[str, Any]]:
    """Warm each peer up, then time ROUNDS rounds of RUNS workflows, the peers in turn."""
    per_run = max(1, STEPS // RUNS)
    for _url, session in peers.values():
        session(2, 5)
    empty = {name: _delta(url, session, 0, 1) for name, (url, session) in peers.items()}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in peers}
    for _ in range(ROUNDS):
        for name, (url, session) in peers.items():
            rounds[name].append(_delta(url, session, RUNS, per_run))
    return {name: _summary(name, rounds[name], empty[name]) for name in peers}


def _dbos_session(url: str) -> Session:
    """Register a no-op workflow and step with DBOS; return a session launching DBOS on ``url``."""
    from dbos import DBOS

    step_s: list[float] = []

    @DBOS.step()
    def noop_step(i: int) -> int:
        return i

    @DBOS.workflow()
    def noop_workflow(n: int) -> int:
        last = time.perf_counter()
        for i in range(n):
            noop_step(i)
            now = time.perf_counter()
            step_s.append(now - last)
            last = now
        return n

    system_url = urlunsplit(urlsplit(url)._replace(scheme="postgresql"))

    def session(runs: int, per_run: int) -> tuple[float, list[float]]:
        step_s.clear()
        DBOS(config={"name": "agentops-bench-peers", "system_database_url": system_url,
                     "log_level": "WARNING"})
        DBOS.launch()
        try:
            start = time.perf_counter()
            for _ in range(runs):
                noop_workflow(per_run)
            elapsed = time.perf_counter() - start
        finally:
            DBOS.destroy()
        return elapsed, list(step_s)

    return session


class _LoopState(TypedDict):
    i: int
    n: int


def _tick(state: _LoopState) -> dict[str, int]:
    return {"i": state["i"] + 1}


def _again(state: _LoopState) -> str:
    from langgraph.graph import END

    return "tick" if state["i"] < state["n"] else END


def _langgraph_session(url: str) -> Session:
    """Return a session that runs a self-looping one-node graph checkpointed in ``url``."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import START, StateGraph

    builder = StateGraph(_LoopState)
    builder.add_node("tick", _tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", _again)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()

    def session(runs: int, per_run: int) -> tuple[float, list[float]]:
        step_s: list[float] = []
        with PostgresSaver.from_conn_string(url) as saver:
            graph = builder.compile(checkpointer=saver)
            start = time.perf_counter()
            for _ in range(runs):
                config = {"configurable": {"thread_id": str(uuid.uuid4())},
                          "recursion_limit": per_run + 10}
                last = time.perf_counter()
                for _chunk in graph.stream({"i": 0, "n": per_run}, config, durability="sync",
                                           stream_mode="updates"):
                    now = time.perf_counter()
                    step_s.append(now - last)
                    last = now
            elapsed = time.perf_counter() - start
        return elapsed, step_s

    return session


def _versions() -> dict[str, str]:
    """Return the versions measured: peers, drivers, server, Python."""
    import psycopg

    out = {pkg: importlib.metadata.version(pkg) for pkg in PACKAGES}
    with psycopg.connect(maintenance_url(BASE_URL)[0]) as conn:
        out["postgresql"] = str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]
    out["python"] = platform.python_version()
    return out


def main() -> None:
    """Measure both peers and the floor, print the JSON line (or why it is skipped)."""
    missing = _missing_peers()
    if missing:
        log(f"peers: {', '.join(missing)} not importable; skipped")
        emit("peers", {"skipped": True, "reason": SKIP_REASON})
        return
    _TRIPS.start()
    urls = {peer: db_url_suffixed(BASE_URL, f"_{peer}") for peer in ("floor", "dbos", "lg")}
    for url in urls.values():
        db_fresh(url)
    _walinspect_install(urls["floor"])
    log(f"peers: {STEPS} no-op steps over {RUNS} workflows, {ROUNDS} rounds, sequential")
    floor_before = _floor(urls["floor"])
    measured = _measure({"dbos": (urls["dbos"], _dbos_session(urls["dbos"])),
                         "langgraph": (urls["lg"], _langgraph_session(urls["lg"]))})
    dbos, lg = measured["dbos"], measured["langgraph"]
    floor = (floor_before + _floor(urls["floor"])) / 2
    log(f"floor: {floor:.1f} commits/s")
    emit("peers", {
        "dbos_steps_per_s": dbos["steps_per_s"],
        "langgraph_steps_per_s": lg["steps_per_s"],
        "floor_commits_per_s": round(floor, 1),
        "dbos_commits_per_step": dbos["commits_per_step"],
        "langgraph_commits_per_step": lg["commits_per_step"],
        "dbos_write_commits_per_step": dbos["write_commits_per_step"],
        "langgraph_write_commits_per_step": lg["write_commits_per_step"],
        # Shares of the floor measured in this run compare across loads and machines.
        "dbos_share_of_floor": round(dbos["steps_per_s"] / floor, 3),
        "langgraph_share_of_floor": round(lg["steps_per_s"] / floor, 3),
        "langgraph_vs_dbos": round(lg["steps_per_s"] / dbos["steps_per_s"], 2),
        "dbos": dbos,
        "langgraph": lg,
        "versions": _versions(),
        "reference_issue_9": REFERENCE,
    })


if __name__ == "__main__":
    main()
