"""What the failover drill's in-flight runs wait for after the promotion, part by part.

``Reconnects`` watches the new primary's sessions from the moment the promotion begins and
notes when each of the worker host's processes (``pids``) is connected to it again (its sessions are
named ``host:pid``, its lease keepers ``agentops-lease-keeper-<pid>``). ``run_parts`` reads
each in-flight run's events on the new primary: its lease's end as last renewed on the old
primary, its ``run.recovered``, the first event written after that (the new tick's first
unit) and its last event. Times are seconds after the promotion began.
"""
from __future__ import annotations

import statistics
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal

import psycopg

from runs.models import Event


class Reconnects:
    """Note when each named session first appears on a server, on a thread."""

    def __init__(self, url: str, began: float, pids: set[int]) -> None:
        self.url, self.began, self.first_seen = url, began, {}
        self.names = [f"%:{pid}" for pid in pids] + [f"%keeper-{pid}" for pid in pids]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=1) as conn:
                    while not self._stop.is_set():
                        self._look(conn)
                        time.sleep(0.01)
            except psycopg.OperationalError:  # not promoted yet: read-only or refused
                time.sleep(0.01)

    def _look(self, conn: psycopg.Connection) -> None:
        now = time.time() - self.began
        # Once promoted: a standby's sessions are only libpq checking it takes writes.
        for (name,) in conn.execute("SELECT DISTINCT application_name FROM pg_stat_activity "
                                    "WHERE NOT pg_is_in_recovery() "
                                    "AND application_name LIKE ANY(%s)", [self.names]):
            self.first_seen.setdefault(name, round(now, 3))

    def __enter__(self) -> Reconnects:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def run_parts(leases: dict[str, Decimal], began: float) -> dict[str, dict[str, float]]:
    """Return, over the runs ``leases`` names (id -> lease end, epoch seconds, on the old
    primary), the median and max of each part, in seconds after the promotion began."""
    parts: dict[str, list[float]] = {"lease_left": [], "recovered": [], "first_unit": [],
                                     "done": []}
    start = datetime.fromtimestamp(began, tz=UTC)
    for run_id, lease_end in leases.items():
        events = list(Event.objects.filter(run_id=run_id, at__gte=start).order_by("seq")
                      .values_list("type", "at"))
        recovered = next((i for i, (kind, _) in enumerate(events) if kind == "run.recovered"),
                         None)
        if recovered is None or recovered + 2 >= len(events):
            continue  # finished by its own worker, or nothing after its recovery
        parts["lease_left"].append(float(lease_end) - began)
        # The recovery writes run.recovered and its status change; the tick writes next.
        for name, index in (("recovered", recovered), ("first_unit", recovered + 2),
                            ("done", len(events) - 1)):
            parts[name].append((events[index][1] - start).total_seconds())
    return {name: {"median": round(statistics.median(xs), 3), "max": round(max(xs), 3)}
            for name, xs in parts.items() if xs}
