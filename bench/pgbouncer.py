"""pgbouncer: W worker processes x R runs in flight each, every pooled connection through
PgBouncer in transaction mode on at most S server connections.

A pgbouncer of the bench's own (scripts/pgbouncer_local.py: pool_mode=transaction,
default_pool_size = max_db_connections = S) stands in front of the bench database. Worker
hosts (``manage.py agentops worker``, BENCH_HOSTS of them, W q2 processes in all, each
keeping R runs in flight) connect through it with ``AGENTOPS_DB_POOLER=transaction``; each
q2 process also holds its owner session directly (``AGENTOPS_DB_DIRECT_URL``, runs.pooler).
W x R ``bench-remote`` runs call a real model server (bench.model_server) that sleeps L
seconds per call, S + 1 calls a run.

Figures: runs in flight (peak of the model server's requests being served at once: runs
waiting on their model), steps/s (model replies per second, overall and over the middle half),
peak server connections (pgbouncer's ``SHOW POOLS`` for the database, and PostgreSQL's
pg_stat_activity count for the database, which also holds the owner sessions and this
script's own), peak clients waiting in pgbouncer for a server, errors (runs not succeeded,
``run.recovered`` events, worker log lines with ERROR or a traceback), and the machine's
commit floor.

Env: BENCH_WORKERS (20), BENCH_IN_FLIGHT (250), BENCH_HOSTS (2), BENCH_DELAY_S (30),
BENCH_STEPS (2), BENCH_MAX_SERVER (40), BENCH_SLICE_S (the hosts' AGENTOPS_TICK_SLICE_S; unset:
the default, so a run yields its slot after each model call while ticks wait),
BENCH_WORKER_LOG_DIR (the hosts' output; a temporary
folder). The bench database: BENCH_PGBOUNCER_DATABASE_URL (default agentops_bench_pgbouncer),
dropped and created afresh.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

# Its own database, dropped and created afresh (never the console seed's BENCH_DATABASE_URL).
os.environ["BENCH_DATABASE_URL"] = os.environ.get(
    "BENCH_PGBOUNCER_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentops_bench_pgbouncer")
os.environ.setdefault("AGENTOPS_AGENTS", "bench.agents")

from bench._common import (bench_url, commit_floor, db_fresh, django_boot, emit,  # noqa: E402
                           log, maintenance_url)
from bench.model_server import model_env, model_server_start, stats_get  # noqa: E402
from pgbouncer_local import Bouncer  # noqa: E402

WORKERS = int(os.environ.get("BENCH_WORKERS", "20"))
IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", "250"))
HOSTS = int(os.environ.get("BENCH_HOSTS", "2"))
DELAY_S = float(os.environ.get("BENCH_DELAY_S", "30"))
STEPS = int(os.environ.get("BENCH_STEPS", "2"))
MAX_SERVER = int(os.environ.get("BENCH_MAX_SERVER", "40"))
SLICE_S = os.environ.get("BENCH_SLICE_S", "")  # AGENTOPS_TICK_SLICE_S of the hosts; "": default
TTL_S = 3.0
RUNS = WORKERS * IN_FLIGHT


def _hosts_start(bouncer: Bouncer, model_url: str, log_dir: Path) -> list[subprocess.Popen]:
    """Start BENCH_HOSTS worker hosts sharing the WORKERS q2 processes."""
    name = maintenance_url(bench_url())[1]
    hosts = []
    for i in range(HOSTS):
        share = WORKERS // HOSTS + (1 if i < WORKERS % HOSTS else 0)
        env = {**os.environ, "DATABASE_URL": bouncer.url(name),
               "AGENTOPS_DB_POOLER": "transaction", "AGENTOPS_DB_DIRECT_URL": bench_url(),
               "AGENTOPS_WORKERS": str(share), "AGENTOPS_RUNS_IN_FLIGHT": str(IN_FLIGHT),
               "AGENTOPS_LEASE_TTL_S": str(TTL_S), **model_env(model_url),
               "LOG_LEVEL": "ERROR"}
        for knob in ("AGENTOPS_ENQUEUE_TICKS", "AGENTOPS_TICK_SLICE_S", "TEST_DATABASE_NAME"):
            env.pop(knob, None)
        if SLICE_S:
            env["AGENTOPS_TICK_SLICE_S"] = SLICE_S
        out = open(log_dir / f"host{i}.log", "ab")  # noqa: SIM115
        hosts.append(subprocess.Popen([sys.executable, "manage.py", "agentops", "worker"],
                                      cwd=ROOT, env=env, stdout=out, stderr=out,
                                      start_new_session=True))
    return hosts


def _servers(bouncer: Bouncer, name: str) -> tuple[int, int]:
    """Return (server connections pgbouncer holds for the database, clients waiting)."""
    import psycopg

    with psycopg.connect(bouncer.url("pgbouncer"), autocommit=True,
                         cursor_factory=psycopg.ClientCursor) as conn:  # simple protocol only
        cur = conn.execute("SHOW POOLS")
        cols = [c.name for c in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall() if r[cols.index("database")] == name]
    servers = sum(r[k] for r in rows for k in ("sv_active", "sv_idle", "sv_used", "sv_tested",
                                                 "sv_login"))
    return servers, sum(r["cl_waiting"] for r in rows)


def _pg_sessions(name: str) -> tuple[int, int]:
    """Return (sessions on the database, of which owner sessions named host:pid)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(*) FILTER (WHERE application_name ~ '^[^ ]+:[0-9]+$'"
                    " AND pid <> pg_backend_pid()) FROM pg_stat_activity WHERE datname = %s",
                    [name])
        return cur.fetchone()


def _create_runs() -> list:
    from django.conf import settings

    from runs.services import run_start

    settings.AGENTOPS_ENQUEUE_TICKS = False
    tag = os.urandom(4).hex()  # the model server counts calls per goal
    ids = [run_start(agent="bench-remote", goal=f"pgbouncer {tag} {i}", input={}).pk
           for i in range(RUNS)]
    settings.AGENTOPS_ENQUEUE_TICKS = True
    return ids


def _watch(ids: list, bouncer: Bouncer, model_url: str) -> dict:
    """Enqueue every run's tick, then sample once a second until every run ended."""
    from runs.engine.runtime.queue import enqueue_tick
    from runs.models import Run

    name = maintenance_url(bench_url())[1]
    peak = {"in_flight": 0, "servers": 0, "waiting": 0, "pg_sessions": 0, "owner_sessions": 0}
    t0 = time.monotonic()
    for pk in ids:
        enqueue_tick(pk)
    log(f"{len(ids)} ticks enqueued in {time.monotonic() - t0:.1f}s")
    limit = 900 + 3 * (STEPS + 1) * DELAY_S
    while time.monotonic() - t0 < limit:
        servers, waiting = _servers(bouncer, name)
        sessions, owners = _pg_sessions(name)
        current = stats_get(model_url)["current"]
        if current > peak["in_flight"]:
            peak["to_peak_s"] = round(time.monotonic() - t0, 1)
        for key, value in (("in_flight", current), ("servers", servers), ("waiting", waiting),
                           ("pg_sessions", sessions), ("owner_sessions", owners)):
            peak[key] = max(peak[key], value)
        left = Run.objects.filter(pk__in=ids).exclude(
            status__in=("succeeded", "failed", "blocked")).count()
        if not left:
            break
        time.sleep(1.0)
    peak["wall_s"] = round(time.monotonic() - t0, 1)
    return peak


def _outcome(ids: list, log_dir: Path) -> dict:
    """Steps/s from the runs' model.replied events; how the runs ended; errors."""
    from django.db.models import Count

    from runs.models import Event, Run

    times = sorted(at.timestamp() for at in Event.objects.filter(
        run_id__in=ids, type="model.replied").values_list("at", flat=True))
    first, last = times[0], times[-1]
    q1, q3 = first + (last - first) / 4, first + 3 * (last - first) / 4
    ended = dict(Run.objects.filter(pk__in=ids).values("status").annotate(n=Count("pk"))
                 .values_list("status", "n"))
    recovered = dict(Event.objects.filter(run_id__in=ids, type="run.recovered")
                     .values("data__cause").annotate(n=Count("pk"))
                     .values_list("data__cause", "n"))
    errors = sum(line.count("ERROR") + line.count("Traceback")
                 for f in log_dir.glob("host*.log") for line in f.read_text().splitlines())
    return {"model_calls": len(times), "steps_per_s": round(len(times) / (last - first), 1),
            "steps_per_s_mid": round(sum(1 for t in times if q1 <= t <= q3) / (q3 - q1), 1),
            "ended": ended, "recovered_events": recovered, "worker_log_errors": errors,
            "not_succeeded": RUNS - ended.get("succeeded", 0)}


def main() -> None:
    db_fresh(bench_url())
    django_boot()
    floor = commit_floor(conninfo=bench_url())
    log_dir = Path(os.environ.get("BENCH_WORKER_LOG_DIR") or tempfile.mkdtemp(prefix="pgb-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    ids = _create_runs()
    log(f"{RUNS} runs created; {HOSTS} hosts, {WORKERS} q2 processes x {IN_FLIGHT} in flight,"
        f" model {DELAY_S}s x {STEPS + 1} calls a run, <= {MAX_SERVER} server connections")
    server, model_url = model_server_start(DELAY_S, STEPS)
    bouncer = Bouncer(pool_size=MAX_SERVER, max_db_connections=MAX_SERVER,
                      max_client_conn=4000, idle_transaction_timeout=10).start()
    hosts = _hosts_start(bouncer, model_url, log_dir)
    try:
        time.sleep(15)  # the hosts start their q2 processes
        peak = _watch(ids, bouncer, model_url)
    finally:
        for host in hosts:
            os.killpg(host.pid, 15)
        for host in hosts:
            host.wait(60)
        bouncer.stop()
        server.kill()
    got = _outcome(ids, log_dir)
    emit("pgbouncer", {
        "workers": WORKERS, "in_flight_per_worker": IN_FLIGHT, "hosts": HOSTS, "runs": RUNS,
        "delay_s": DELAY_S, "model_calls_per_run": STEPS + 1, "max_server_connections": MAX_SERVER,
        "tick_slice_s": SLICE_S or "default",
        "peak_in_flight": peak["in_flight"], "to_peak_s": peak.get("to_peak_s"),
        "peak_server_connections": peak["servers"], "peak_clients_waiting": peak["waiting"],
        "peak_pg_sessions": peak["pg_sessions"], "peak_owner_sessions": peak["owner_sessions"],
        "wall_s": peak["wall_s"], **got, "n_over_l": round(RUNS / DELAY_S, 1),
        "commit_floor_per_s": round(floor), "load_avg": os.getloadavg()[0],
        "worker_logs": str(log_dir)})


if __name__ == "__main__":
    main()
