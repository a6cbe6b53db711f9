"""q2's cluster with its pusher and monitor as threads of the sentinel, not processes of their own.

q2 forks a sentinel, which forks the worker processes, the pusher (takes tasks off the broker)
and the monitor (acknowledges finished ones). The pusher and the monitor wait on the database
and on a queue nearly all the time, yet each was a forked copy of the whole Django process:
two of a default host's six processes, ~85 MB of RSS each (docs/workers.md "Memory"). Here
they are threads of the sentinel, which otherwise only wakes every few seconds to watch its
worker processes; what they do, and their database sessions, are q2's own.

The pusher's broker is wrapped (``ReconnectingBroker``): when the database goes away (a
restart, a failover to a standby) q2's pusher sleeps 10 s and stops, and no tick taken off
the broker reaches a worker process until the sentinel has started it again; here the broker
is asked again every ``BROKER_RETRY_S`` on a new connection, and answers as soon as the
database (or the standby promoted in its place) does.

The sentinel forks a worker process again (a recycled or dead one) while these threads run.
Neither holds a lock a worker process takes: the pusher only puts on the task queue (whose
feeding thread and locks a forked child resets), the monitor reads the result queue, which
workers only put on; logging's locks are re-made in a forked child.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from multiprocessing import Event, Value
from typing import IO, Any

from django.db import Error as DatabaseFailure
from django_q.cluster import Cluster, Sentinel, get_mp_context
from django_q.monitor import monitor
from django_q.pusher import pusher
from django_q.status import Stat
from django_q.worker import worker

from runs.cli.q2_queue import TaskReader, reader_lock_file

_MONITOR_DRAIN_S = 30.0
BROKER_RETRY_S = 0.5  # how often a pusher asks a broker whose database went away
log = logging.getLogger("agentops.worker")


class HostCluster(Cluster):
    """q2's ``Cluster`` whose sentinel is a ``ThreadedSentinel``."""

    def start(self) -> int:
        """Fork the sentinel and wait until it says the cluster runs (q2's ``start``)."""
        self.stop_event, self.start_event = Event(), Event()
        self.sentinel = get_mp_context().Process(
            target=ThreadedSentinel, name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker,
                  self.timeout))
        self.sentinel.start()
        # Polled, not waited on: a signal during wait() would deadlock (q2's own comment).
        while self.start_event and not self.start_event.is_set():
            if not self.sentinel.is_alive():
                if self.sentinel.exitcode == 0:  # stopped by a signal while starting
                    break
                raise RuntimeError(f"Q Cluster {self.name} failed to start: sentinel exited "
                                   f"with code {self.sentinel.exitcode}")
            time.sleep(0.1)
        return self.pid


class ThreadedSentinel(Sentinel):
    """q2's sentinel running the pusher and the monitor as its own threads, whose worker
    processes read the task queue through a TaskReader (runs.cli.q2_queue)."""

    _reader_lock: IO[bytes] | None = None  # made by the first spawn_worker (q2's __init__)

    def spawn_worker(self) -> None:
        """Fork a worker process as q2 does, reading its tasks through a TaskReader."""
        if self._reader_lock is None:
            self._reader_lock = reader_lock_file()
        self.spawn_process(worker, TaskReader(self.task_queue, self._reader_lock),
                           self.result_queue, Value("f", -1), self.timeout)

    def spawn_pusher(self) -> threading.Thread:
        return _thread(pusher, "q2-pusher", self.task_queue, self.event_out,
                       ReconnectingBroker(self.broker))

    def spawn_monitor(self) -> threading.Thread:
        return _thread(monitor, "q2-monitor", self.result_queue, self.broker)

    def stop(self) -> None:
        """Stop as q2 does, but let the monitor thread read every result before the result
        queue is closed: closing it closes its reading end in this process too."""
        self.event_out.set()
        while self.pusher.is_alive():
            time.sleep(0.1)
        for _ in range(len(self.pool)):
            self.task_queue.put("STOP")
        self.task_queue.close()
        self.task_queue.join_thread()
        while self.pool:
            self.pool = [p for p in self.pool if p.is_alive()]
            time.sleep(0.1)
        self.result_queue.put("STOP")
        self.monitor.join(_MONITOR_DRAIN_S)
        self.result_queue.close()
        self.result_queue.join_thread()
        Stat(self).save()


class _RoleThread(threading.Thread):
    """A thread where q2 expects a process: its status rows read the role's ``pid``."""

    @property
    def pid(self) -> int:
        return os.getpid()


def _thread(target: Any, name: str, *args: Any) -> threading.Thread:
    thread = _RoleThread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


class ReconnectingBroker:
    """q2's broker for its pusher: a failure of the database under it is waited out here,
    asking again every ``BROKER_RETRY_S`` (q2's ORM broker replaces a connection that failed
    before each query), instead of stopping the pusher for q2's 10 s. Other errors are
    left to q2."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker
        self._down_since: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    def dequeue(self) -> Any:
        """Return the broker's next tasks; None (after a short wait) while its database fails."""
        try:
            tasks = self._broker.dequeue()
        except DatabaseFailure as exc:
            if self._down_since is None:
                self._down_since = time.monotonic()
                log.warning("cannot take tasks off the broker, asking again every %gs: %s",
                            BROKER_RETRY_S, exc)
            time.sleep(BROKER_RETRY_S)
            return None
        if self._down_since is not None:
            log.warning("the broker answers again after %.1fs",
                        time.monotonic() - self._down_since)
            self._down_since = None
        return tasks
