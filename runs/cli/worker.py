"""``agentops worker``: a django-q2 cluster and the sweeper in one process, stopped together."""
from __future__ import annotations

import signal
import threading
import time
from typing import Any

from django.conf import settings

from runs.sweeper import sweep_loop, sweeper_name


def worker_serve(*, workers: int | None = None, sweeper: bool = True, out: Any = None) -> int:
    """Run a q2 cluster (and the sweeper thread) until SIGINT/SIGTERM; return an exit code."""
    if workers:
        settings.Q_CLUSTER["workers"] = workers
    from django_q.cluster import Cluster

    stop = threading.Event()
    cluster = Cluster()  # installs SIGINT/SIGTERM handlers that stop the cluster
    _chain_stop(stop)
    # Fork the q2 sentinel before any thread of ours exists: a fork while the sweeper thread
    # holds a lock (logging, a database connection) would leave the child deadlocked.
    cluster.start()
    thread = None
    if sweeper:
        thread = threading.Thread(target=sweep_loop, args=(stop,), name="agentops-sweeper",
                                  kwargs={"name": sweeper_name()}, daemon=True)
        thread.start()
    if out:
        out.write(f"worker up: q2 cluster {settings.Q_CLUSTER['name']} with "
                  f"{settings.Q_CLUSTER['workers']} processes"
                  f"{', sweeper every %.1fs' % settings.AGENTOPS_SWEEP_INTERVAL_S if sweeper else ''}"
                  f"; lease TTL {settings.AGENTOPS_LEASE_TTL_S:.1f}s\n")
    while cluster.sentinel is not None and cluster.sentinel.is_alive() and not stop.is_set():
        time.sleep(0.2)
    stop.set()
    if cluster.sentinel is not None and cluster.sentinel.is_alive():
        cluster.stop()
    if thread is not None:
        thread.join(timeout=settings.AGENTOPS_SWEEP_INTERVAL_S + 5)
    return 0


def _chain_stop(stop: threading.Event) -> None:
    # q2's handlers stop the cluster; ours also stops the sweeper, then calls theirs.
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)

        def handler(num: int, frame: Any, previous: Any = previous) -> None:
            stop.set()
            if callable(previous):
                previous(num, frame)

        signal.signal(signum, handler)
