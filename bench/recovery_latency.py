"""recovery_latency: SIGKILL the worker running a run; time until another worker commits.

Two real worker processes (``manage.py agentops worker``: a q2 cluster + the sweeper) serve
the bench database. For each trial a run of slow steps starts; once a worker holds it, that
worker's whole process group is killed, and the time until the run's next committed event
written under a different lease owner is the recovery latency. The killed worker is
restarted before the next trial. Default settings (lease TTL, sweep interval) apply.
"""
from __future__ import annotations

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

from bench._common import bench_url, django_boot, emit, log, percentiles  # noqa: E402

TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))


def _spawn(tag: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": bench_url(), "AGENTOPS_AGENTS": "bench.agents",
           "AGENTOPS_WORKERS": "1"}
    return subprocess.Popen([sys.executable, "manage.py", "agentops", "worker"], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _holder(run_id, timeout: float = 30.0) -> tuple[str, int]:
    from runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Run.objects.filter(pk=run_id).values("status", "lease_owner", "last_seq").first()
        if row["status"] == "running" and row["lease_owner"] and row["last_seq"] > 4:
            return row["lease_owner"], row["last_seq"]
        time.sleep(0.02)
    raise RuntimeError(f"no worker picked up run {run_id} within {timeout}s")


def _next_commit_by_other(run_id, dead_owner: str, after_seq: int, timeout: float = 60.0) -> float:
    from runs.models import Run

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        row = Run.objects.filter(pk=run_id).values("lease_owner", "last_seq").first()
        if row["last_seq"] > after_seq and row["lease_owner"] not in ("", dead_owner):
            return time.monotonic() - start
        time.sleep(0.02)
    raise RuntimeError(f"run {run_id} did not continue within {timeout}s")


def main() -> None:
    django_boot()
    from django.conf import settings

    from runs.services import run_start

    workers = {"a": _spawn("a"), "b": _spawn("b")}
    latencies = []
    try:
        time.sleep(3)
        for trial in range(TRIALS):
            run = run_start(agent="bench-slow", goal="recover", input={"steps": 400})
            owner, seq = _holder(run.pk)
            pid = int(owner.rsplit(":", 1)[1])
            victim = next(k for k, p in workers.items() if _in_group(pid, p.pid))
            os.killpg(workers[victim].pid, signal.SIGKILL)
            workers[victim].wait()
            latencies.append(_next_commit_by_other(run.pk, owner, seq))
            log(f"trial {trial + 1}: {latencies[-1]:.2f}s")
            from runs.services import run_cancel

            run.refresh_from_db()
            run_cancel(run=run, reason="bench trial over")
            workers[victim] = _spawn(victim)
    finally:
        for p in workers.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    stats = percentiles(latencies)
    emit("recovery_latency", {"trials": len(latencies), "p50_s": stats["p50"],
                              "p99_s": stats["p99"], "max_s": stats["max"],
                              "lease_ttl_s": settings.AGENTOPS_LEASE_TTL_S,
                              "sweep_interval_s": settings.AGENTOPS_SWEEP_INTERVAL_S})


def _in_group(pid: int, leader: int) -> bool:
    try:
        return os.getpgid(pid) == leader
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    main()
