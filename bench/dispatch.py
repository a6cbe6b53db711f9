"""dispatch: how many q2 tasks one worker host dispatches per second (no-op ticks).

BENCH_TASKS (1000) no-op tasks are enqueued the way ticks are (``enqueue_tick``'s q2
options), with the host stopped; then one ``manage.py agentops worker`` host with default
settings starts and works them. Figures: enqueue/s (the bench process, one commit each), and
tasks/s taken (from the first task taken off the queue to the last one: q2 locks its
``django_q_ormq`` row) and tasks/s dispatched (to the last one acknowledged: the row
deleted once the task ran and q2 recorded it), so the host's start-up is not counted.
Also the commit floor, and the host's CPU seconds per task.

The task is a no-op, so this is q2's own cost per task (pusher, worker, monitor, broker
round trips and commits): the ceiling on how fast runs are handed to run slots.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = int(os.environ.get("BENCH_TASKS", "1000"))


def noop(i: int) -> int:
    """The task: nothing (what is measured is q2's handing it out)."""
    return i


def _queued() -> int:
    from django_q.models import OrmQ

    return OrmQ.objects.count()


def _untaken() -> int:
    """Return how many tasks no cluster has taken yet (q2 locks a row when it takes it)."""
    from django.utils import timezone
    from django_q.models import OrmQ

    return OrmQ.objects.filter(lock__lte=timezone.now()).count()


def _enqueue() -> float:
    """Enqueue TASKS no-op tasks with the ticks' q2 options; return enqueues/s."""
    from django_q.tasks import async_task

    from runs.engine.runtime.queue import tick_q_options

    t0 = time.perf_counter()
    for i in range(TASKS):
        async_task("bench.dispatch.noop", i, task_name=f"noop:{i}", q_options=tick_q_options())
    return TASKS / (time.perf_counter() - t0)


def _work(host_pid: int, timeout_s: float) -> dict[str, float]:
    """Wait for the first task taken, the last taken and the last acknowledged.

    Return the seconds from the first taken to the last taken and to the last acknowledged,
    and the host's CPU seconds over that window.
    """
    from bench.density import _cpu_s, _group

    deadline = time.monotonic() + timeout_s
    while _untaken() >= TASKS and time.monotonic() < deadline:
        time.sleep(0.01)
    t0, cpu0 = time.monotonic(), _cpu_s(_group(host_pid))
    out = {"taken_s": 0.0}
    while _queued() and time.monotonic() < deadline:
        if not out["taken_s"] and not _untaken():
            out["taken_s"] = time.monotonic() - t0
        out["cpu_s"] = _cpu_s(_group(host_pid)) - cpu0
        time.sleep(0.01)
    if _queued():
        raise RuntimeError(f"{_queued()} tasks still queued after {timeout_s:.0f}s")
    out["acked_s"] = time.monotonic() - t0
    out["taken_s"] = out["taken_s"] or out["acked_s"]
    return out


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("BENCH_ENGINE_DATABASE_URL",
                          "postgres://postgres@127.0.0.1:5432/agentops_bench_dispatch")
    from bench._common import engine_env

    engine_env(in_process=False)
    os.environ["AGENTOPS_ENQUEUE_TICKS"] = "1"
    from bench._common import bench_url, commit_floor, django_boot, emit, log

    django_boot()
    from django.conf import settings
    from django_q.models import OrmQ, Task

    from bench.density import _worker

    OrmQ.objects.all().delete()
    Task.objects.all().delete()
    floor = commit_floor(conninfo=bench_url())
    enq = _enqueue()
    log(f"{TASKS} no-op tasks enqueued ({enq:.0f}/s); starting one worker host")
    host = _worker("http://127.0.0.1:9")
    try:
        got = _work(host.pid, 60 + TASKS / 5)
    finally:
        os.killpg(host.pid, 15)
        host.wait(30)
    q = settings.Q_CLUSTER
    emit("dispatch", {
        "tasks": TASKS, "enqueue_per_s": round(enq), "taken_per_s": round(TASKS / got["taken_s"], 1),
        "dispatched_per_s": round(TASKS / got["acked_s"], 1),
        "host_cpu_ms_per_task": round(1000 * got["cpu_s"] / TASKS, 2),
        "saved_task_rows": Task.objects.count(), "commit_floor_per_s": round(floor),
        "q_cluster": {k: q.get(k) for k in ("workers", "queue_limit", "bulk", "poll",
                                            "save_limit")},
        "load_avg": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
