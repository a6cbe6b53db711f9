"""recovery_latency: kill or pause a BUSY worker mid-run; time until another worker goes on.

Three real worker hosts (``manage.py agentops worker``: a q2 cluster + the sweeper) serve
the bench database, kept busy by ``BENCH_RUNS_PER_WORKER`` (default 20) slow runs each, so
a recovered run competes with dozens of queued ones. Each trial picks a run being worked on,
then either SIGKILLs its worker's whole process group (restarted after the trial) or
SIGSTOPs it (a GC pause, a frozen VM; SIGCONT after the trial). The recovery latency is the
time from the signal to the first committed unit of work of that run (an event other than
a status change) written by another worker. Trials alternate kill and stop.

Fair trials: the victim is the least-recovered run being worked on (a run recovered many
times already is not picked again and again), and the recovery limit is lifted
(``AGENTOPS_RECOVERY_LIMIT``, 1000) so no run is blocked after its fifth recovery. Spurious
recoveries (a run whose owner was NOT the signalled host: its lease expired though its
worker was alive) are counted as lease expiries.
"""
from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import engine_env  # noqa: E402

engine_env(in_process=False)
os.environ["AGENTOPS_RECOVERY_LIMIT"] = os.environ.get("BENCH_RECOVERY_LIMIT", "1000")

from bench._common import (bench_url, commit_floor, django_boot, emit, log,  # noqa: E402
                           percentiles)

TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))
PER_WORKER = int(os.environ.get("BENCH_RUNS_PER_WORKER", "20"))
HOSTS = 3
_NOT_WORK = ("run.status", "run.recovered")


def _spawn() -> subprocess.Popen:
    """Start a worker host; its log goes to BENCH_HOST_LOG (appended) when that is set."""
    env = {**os.environ, "DATABASE_URL": bench_url(), "AGENTOPS_AGENTS": "bench.agents",
           "AGENTOPS_WORKERS": "1", "LOG_LEVEL": os.environ.get("BENCH_HOST_LOG_LEVEL", "ERROR")}
    path = os.environ.get("BENCH_HOST_LOG")
    out = open(path, "a") if path else subprocess.DEVNULL  # noqa: SIM115 - the host keeps it
    return subprocess.Popen([sys.executable, "manage.py", "agentops", "worker"], cwd=ROOT,
                            env=env, stdout=out, stderr=out, start_new_session=True)


def _victim(ids: list, hosts: list[subprocess.Popen], timeout: float = 30.0):
    """Return (run id, owner, host index, last seq) of the least-recovered run worked on now."""
    from runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for row in (Run.objects.filter(pk__in=ids, status="running").exclude(lease_owner="")
                    .order_by("recoveries", "?").values("pk", "lease_owner", "last_seq")):
            pid = int(row["lease_owner"].rsplit(":", 1)[1])
            host = next((i for i, p in enumerate(hosts) if _in_group(pid, p.pid)), None)
            if host is not None:
                return row["pk"], row["lease_owner"], host, row["last_seq"]
        time.sleep(0.05)
    raise RuntimeError("no run is being worked on")


def _next_unit_by_other(run_id, owner: str, after_seq: int, since: dt.datetime,
                        timeout: float = 60.0) -> float:
    from runs.models import Event, Run

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        row = Run.objects.filter(pk=run_id).values("lease_owner", "last_seq").first()
        if row["last_seq"] > after_seq:
            ev = (Event.objects.filter(run_id=run_id, seq__gt=after_seq, at__gt=since)
                  .exclude(type__in=_NOT_WORK).order_by("seq").values("at").first())
            claimed_by_other = row["lease_owner"] not in ("", owner)
            if ev is not None and claimed_by_other:
                return (ev["at"] - since).total_seconds()
        time.sleep(0.02)
    raise RuntimeError(f"run {run_id} did not continue within {timeout}s")


def _trial(n: int, ids: list, hosts: list[subprocess.Popen],
           victims: set[str]) -> dict:
    from django.utils import timezone

    from runs.models import Run

    how = "kill" if n % 2 == 0 else "stop"
    run_id, owner, host, seq = _victim(ids, hosts)
    victims |= {f"{owner.rsplit(':', 1)[0]}:{pid}" for pid in _group_pids(hosts[host].pid)}
    since = timezone.now()
    os.killpg(hosts[host].pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    # Read at once: the victim's keeper stopped or died with it, so this is the lease's end.
    expires = Run.objects.filter(pk=run_id).values_list("lease_expires_at", flat=True).first()
    try:
        latency = _next_unit_by_other(run_id, owner, seq, since)
    finally:
        if how == "kill":
            hosts[host].wait()
            hosts[host] = _spawn()
        else:
            os.killpg(hosts[host].pid, signal.SIGCONT)
    return {"kind": how, "latency_s": round(latency, 3),
            **_breakdown(run_id, seq, since, expires, latency)}


def _breakdown(run_id, after_seq: int, since: dt.datetime, expires: dt.datetime | None,
               latency: float) -> dict:
    """Split a trial's latency by the run's events: detected (run.recovered), claimed by the
    next worker (run.status -> running), first unit committed (the rest)."""
    from runs.models import Event

    events = list(Event.objects.filter(run_id=run_id, seq__gt=after_seq, at__gt=since)
                  .order_by("seq").values("type", "at", "data"))
    recovered = next((e for e in events if e["type"] == "run.recovered"), None)
    claimed = next((e for e in events if e["type"] == "run.status"
                    and e["data"].get("to") == "running"
                    and (recovered is None or e["at"] >= recovered["at"])), None)
    out: dict = {"cause": recovered["data"].get("cause") if recovered else None}
    if expires is not None:
        out["lease_left_s"] = round((expires - since).total_seconds(), 3)
    if recovered is not None:
        out["detect_s"] = round((recovered["at"] - since).total_seconds(), 3)
        if claimed is not None:
            out["dispatch_s"] = round((claimed["at"] - recovered["at"]).total_seconds(), 3)
            out["first_unit_s"] = round(latency - (claimed["at"] - since).total_seconds(), 3)
    return out


def main() -> None:
    django_boot()
    from django.conf import settings

    from runs.services import run_start

    floor = commit_floor(conninfo=bench_url())
    log(f"PostgreSQL commit floor: {floor:.0f} commits/s")
    _cancel_active()
    hosts = [_spawn() for _ in range(HOSTS)]
    by_kind: dict[str, list[float]] = {"kill": [], "stop": []}
    trials: list[dict] = []
    victims: set[str] = set()
    try:
        ids = [run_start(agent="bench-slow", goal=f"busy {i}", input={"steps": 100_000}).pk
               for i in range(HOSTS * PER_WORKER)]
        time.sleep(5)  # every host busy, the queue long
        for trial in range(TRIALS):
            row = _trial(trial, ids, hosts, victims)
            trials.append(row)
            by_kind[row["kind"]].append(row["latency_s"])
            log(f"trial {trial + 1}: {row}")
            time.sleep(1.5)  # a restarted host comes up; the resumed one settles
    finally:
        for p in hosts:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        _cancel_active()
    expiries = _spurious_recoveries(ids, victims)
    both = by_kind["kill"] + by_kind["stop"]
    stats, kill, stop = percentiles(both), percentiles(by_kind["kill"]), percentiles(by_kind["stop"])
    emit("recovery_latency", {
        "trials": len(both), "busy_runs": HOSTS * PER_WORKER, "workers": HOSTS,
        "p50_s": stats["p50"], "p99_s": stats["p99"], "max_s": stats["max"],
        "kill_p50_s": kill.get("p50"), "kill_p99_s": kill.get("p99"),
        "stop_p50_s": stop.get("p50"), "stop_p99_s": stop.get("p99"),
        "recoveries": expiries["all"], "lease_expiries_of_live_workers": expiries["spurious"],
        "lease_ttl_s": settings.AGENTOPS_LEASE_TTL_S,
        "sweep_interval_s": settings.AGENTOPS_SWEEP_INTERVAL_S,
        "parts": _parts(trials),
        "commit_floor_per_s": round(floor), "load_avg": os.getloadavg()[0],
        "per_trial": trials})


def _parts(trials: list[dict]) -> dict:
    """Return p50/p99 of each part of the latency, per kind of trial."""
    out = {}
    for kind in ("kill", "stop"):
        rows = [t for t in trials if t["kind"] == kind]
        for part in ("lease_left_s", "detect_s", "dispatch_s", "first_unit_s"):
            got = percentiles([t[part] for t in rows if part in t])
            if got.get("n"):
                out[f"{kind}_{part}"] = {"p50": got["p50"], "p99": got["p99"]}
    return out


def _cancel_active() -> None:
    from runs.models import Run
    from runs.services import run_cancel

    for run in Run.objects.filter(status__in=["queued", "running", "waiting"]):
        run_cancel(run=run, reason="recovery bench over")


def _spurious_recoveries(ids: list, victims: set[str]) -> dict[str, int]:
    """Count the runs' recoveries, and those whose owner was never a signalled process."""
    from runs.models import Event

    owners = list(Event.objects.filter(run_id__in=ids, type="run.recovered")
                  .values_list("data__lost_owner", flat=True))
    return {"all": len(owners), "spurious": sum(1 for o in owners if o not in victims)}


def _group_pids(leader: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(leader)], capture_output=True,
                         text=True).stdout
    return {int(p) for p in out.split()}


def _in_group(pid: int, leader: int) -> bool:
    try:
        return os.getpgid(pid) == leader
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    main()
