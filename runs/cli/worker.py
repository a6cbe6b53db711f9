"""``agentops worker``: a django-q2 cluster and the sweeper in one process, stopped together."""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.conf import settings

from agentops.agents import registry
from approvals.audit_sink import audit_sink_loop
from approvals.notify.sender import sender_loop
from runs.cli.lifeline import die_with_parent_install
from runs.cli.q2_host import HostCluster
from runs.handoff import handoff_install
from runs.pooler import pooled
from runs.recoverer import recover_loop
from runs.sweeper import sweep_loop, sweeper_name


log = logging.getLogger("agentops.worker")


class AgentModulesBroken(Exception):
    """An agent module in AGENTOPS_AGENTS failed to import; the worker does not start."""


def worker_serve(*, workers: int | None = None, sweeper: bool = True, out: Any = None) -> int:
    """Run a q2 cluster (and the sweeper thread) until SIGINT/SIGTERM; return an exit code.

    The agent modules are imported first, before q2 forks (its processes inherit them): a
    module that does not import stops the worker here, naming it, instead of failing every
    tick of every agent later.
    """
    _agent_modules_check()
    die_with_parent_install()
    if workers:
        settings.Q_CLUSTER["workers"] = workers
    _idle_transactions_end()
    # Before q2 forks: its worker processes inherit the recoverer's wake (runs.handoff).
    handoff_install(processes=settings.Q_CLUSTER["workers"])

    stop = threading.Event()
    cluster = HostCluster()  # installs SIGINT/SIGTERM handlers; ours replace them (see _on_signal)
    _on_signal(stop)
    # Fork the q2 sentinel before any thread of ours exists: a fork while the sweeper thread
    # holds a lock (logging, a database connection) would leave the child deadlocked.
    try:
        cluster.start()
    except RuntimeError:
        if stop.is_set():  # a stop signal reached the sentinel while it was starting
            return 0
        raise
    thread = _sweeper_start(stop) if sweeper else None
    if out:
        _say_up(out, sweeper=sweeper)
    while cluster.sentinel is not None and cluster.sentinel.is_alive() and not stop.is_set():
        time.sleep(0.2)
    died = _sentinel_died(cluster, stop)
    stop.set()
    _cluster_stop(cluster)
    if thread is not None:
        thread.join(timeout=settings.AGENTOPS_SWEEP_INTERVAL_S + 5)
    return 1 if died else 0


def _sentinel_died(cluster: Any, stop: threading.Event) -> bool:
    """Return True when q2's sentinel ended with no stop asked for (killed on its own, say):
    the worker then exits 1, not 0, so a supervisor that restarts failures starts it again."""
    if stop.is_set():
        return False
    time.sleep(0.3)  # a signal to the whole process group may reach this process just after
    if stop.is_set():
        return False
    sentinel = cluster.sentinel
    log.error("q2's sentinel (pid %s) ended with exit code %s while nobody stopped the worker: "
              "the worker stops too and exits 1", getattr(sentinel, "pid", None),
              getattr(sentinel, "exitcode", None))
    return True


def _sweeper_start(stop: threading.Event) -> threading.Thread:
    """Start the sweeper, recoverer, notification sender and audit stream threads; return
    the sweeper's."""
    # The recoverer takes the runs of lost workers as soon as it notices (runs.recoverer):
    # the sweep, which may take a while on a loaded host, leaves them to it.
    threading.Thread(target=recover_loop, args=(stop,), name="agentops-recoverer",
                     daemon=True).start()
    thread = threading.Thread(target=sweep_loop, args=(stop,), name="agentops-sweeper",
                              kwargs={"name": sweeper_name(), "recover": False}, daemon=True)
    thread.start()
    # Notifications go out on their own thread: a slow mail server never delays recovery.
    threading.Thread(target=sender_loop, args=(stop,), name="agentops-notify",
                     kwargs={"interval_s": settings.AGENTOPS_SWEEP_INTERVAL_S},
                     daemon=True).start()
    if settings.AGENTOPS_AUDIT_SINK:
        # The audit stream too: a SIEM that is down delays neither recovery nor notices.
        threading.Thread(target=audit_sink_loop, args=(stop,), name="agentops-audit-sink",
                         kwargs={"interval_s": settings.AGENTOPS_SWEEP_INTERVAL_S},
                         daemon=True).start()
    return thread


def _say_up(out: Any, *, sweeper: bool) -> None:
    """Write the one line that says the worker is up, and with what."""
    out.write(f"worker up: q2 cluster {settings.Q_CLUSTER['name']} with "
              f"{settings.Q_CLUSTER['workers']} processes"
              f"{', sweeper every %.1fs' % settings.AGENTOPS_SWEEP_INTERVAL_S if sweeper else ''}"
              f"; lease TTL {settings.AGENTOPS_LEASE_TTL_S:.1f}s\n")
    out.flush()


def _agent_modules_check() -> None:
    """Raise AgentModulesBroken naming every AGENTOPS_AGENTS module that failed to import."""
    broken = registry.broken_modules()
    if broken:
        raise AgentModulesBroken("; ".join(f"agent module {m} failed to import: {e}"
                                           for m, e in broken.items()))


def _idle_transactions_end() -> None:
    """Have PostgreSQL end a worker session left idle inside a transaction for long.

    A worker paused (SIGSTOP, a frozen VM) inside a transaction would hold its row locks
    until it woke: the sweeper skips locked runs, so its run would never be recovered. Set
    before q2 forks, so every worker process connects with it; web processes keep the
    database default. Behind a transaction pooler a session outlives no transaction and
    PgBouncer refuses startup options: its own ``idle_transaction_timeout`` does this there
    (docs/deploy.md, "Behind PgBouncer").
    """
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql" or pooled():
        return
    ms = int(max(10.0, 3 * settings.AGENTOPS_LEASE_TTL_S) * 1000)
    options = db.setdefault("OPTIONS", {})
    flag = f"-c idle_in_transaction_session_timeout={ms}"
    options["options"] = f"{options.get('options', '')} {flag}".strip()


def _on_signal(stop: threading.Event) -> None:
    # q2's handlers call Cluster.stop() from inside the handler. When the signal went to the
    # whole process group (systemd's default, `kill -TERM -PGID`), the sentinel and its
    # processes die at once while still waiting on the stop event, and setting that event
    # then blocks forever. Ours only flag the stop; the main loop stops the cluster.
    def handler(_num: int, _frame: Any) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


def _cluster_stop(cluster: Any, timeout_s: float = 30.0) -> None:
    """Stop q2 gracefully if its sentinel is alive; never hang on one that died meanwhile."""
    sentinel = cluster.sentinel
    time.sleep(0.3)  # a signal to the whole group has reached the sentinel by now
    if sentinel is None or not sentinel.is_alive():
        return
    # Cluster.stop sets a multiprocessing event, which waits for every process that waits on
    # it: if one died meanwhile that never returns, so do it in a thread and give up in time.
    stopper = threading.Thread(target=cluster.stop, name="q2-stop", daemon=True)
    stopper.start()
    stopper.join(timeout_s)
    if sentinel.is_alive():
        sentinel.kill()
        sentinel.join(5)
