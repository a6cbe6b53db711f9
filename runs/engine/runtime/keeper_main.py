"""The lease keeper process: renews a worker's run leases outside the worker's interpreter lock.

A q2 worker process with hundreds of run slots (runs.slots) keeps their leases alive even
while its threads queue for the GIL for seconds: it starts this small program as a child
(runs.engine.runtime.keeper) and tells it which runs it holds. The keeper imports the
standard library only (no Django, not even psycopg: it calls libpq through ctypes,
runs.engine.runtime.keeper_pq), so it starts in a few tens of milliseconds and holds ~16 MB.

Protocol, one line each. stdin: ``hold <run id> <owner>`` / ``release <run id> <owner>``;
``call <run id> <owner> <deadline>`` / ``done <run id> <owner>`` around a tool call of the
run (``deadline``: Unix time). stdout: ``lost <run id>`` for a run no longer leased to its
owner (recovered, claimed by another worker, cancelled, ended); the worker cancels that
run's tool tokens.

A hung worker: a slot still inside a call past its deadline (the attempt's hard deadline,
runs.engine.runtime.fencing: its timeout, or the promised default for a tool that declares
none) is not renewed any more, though its process runs on; its lease expires and the
sweeper recovers the run elsewhere, as for a stopped worker. The slot, if it ever comes
back, finds at its next commit that the run is no longer its own (LeaseLost).

Every ``ttl / 3`` s it renews every held run in one statement per owner, matching run id,
owner and status ``running`` (never the version: the slot's own commits bump it
meanwhile, and renewal never bumps it, so the fence is unchanged). A row locked right now
is being committed by its slot: SKIP LOCKED passes over it and it is retried 0.2 s later,
not reported lost. A hold whose run has never matched yet is a claim still in flight (the
worker holds a run before claiming it, so the first renewal is on time however long the
claim waits for a pooled connection): it is tried again every round and never reported
lost; the worker releases it if the claim fails.

The expiry is this host's wall clock + TTL, the clock the worker's claim and every host's
sweeper (``lease_expires_at < clock.now()``) read, so all writers of the column agree.

It pauses with its worker: each round reads ``/proc/<worker pid>/stat``; a stopped worker
(state T, SIGSTOP or a debugger) gets nothing renewed, so its leases expire and the sweeper
recovers its runs, as for a frozen VM. It exits when its worker is gone (stdin closed,
the pid gone, or this process re-parented), so a SIGKILLed worker leaves no renewing orphan.
It ignores SIGTERM and SIGINT (sent to the whole process group when a worker host stops):
the worker drains its slots after those, and their leases must be kept until it exits.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import select
import signal
import sys
import time

from runs.engine.runtime.keeper_pq import PqConnection, PqError

_RENEW = (
    "UPDATE runs_run SET lease_expires_at = $1::timestamptz WHERE id IN (SELECT id FROM runs_run "
    "WHERE id = ANY($2::uuid[]) AND lease_owner = $3 AND status = 'running' "
    "FOR UPDATE SKIP LOCKED) RETURNING id::text")
# A plain SELECT waits on no row lock: it tells a row being committed (still ours) from a lost one.
_STILL_HELD = ("SELECT id::text FROM runs_run WHERE id = ANY($1::uuid[]) AND lease_owner = $2 "
               "AND status = 'running'")
_RETRY_S = 0.2
_POLL_S = 0.1


class Hold:
    """A run this keeper renews for one owner (a plain class: dataclasses imports inspect,
    ast and dis, a few MB in every keeper)."""

    __slots__ = ("owner", "matched", "deadline")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.matched = False  # renewed at least once: from then on a miss means lost
        self.deadline: float | None = None  # inside a call until then (Unix time); None: no call


class Keeper:
    """The held runs and one renewal round; the I/O loop lives in ``main``."""

    def __init__(self, dsn: str, ttl_s: float, worker_pid: int) -> None:
        self.dsn, self.ttl_s, self.worker_pid = dsn, ttl_s, worker_pid
        self.parent = os.getppid()
        self.holds: dict[str, Hold] = {}
        self.conn: PqConnection | None = None
        self.due = time.monotonic()

    def command(self, line: str) -> None:
        """Apply one ``hold``/``release`` line from the worker."""
        parts = line.split()
        if len(parts) not in (3, 4):
            return
        verb, run_id, owner = parts[:3]
        hold = self.holds.get(run_id)
        if verb == "hold":
            self.holds[run_id] = Hold(owner=owner)
            self.due = min(self.due, time.monotonic() + self.ttl_s / 3)
        elif hold is None or hold.owner != owner:
            return
        elif verb == "release":
            del self.holds[run_id]
        elif verb == "call" and len(parts) == 4:
            try:
                hold.deadline = float(parts[3])
            except ValueError:
                _say(f"ignored a call line with a bad deadline: {line.strip()!r}")
        elif verb == "done":
            hold.deadline = None

    def worker_state(self) -> str:
        """Return the worker's process state letter ('' once it is gone or we were orphaned)."""
        if os.getppid() != self.parent:
            return ""
        try:
            with open(f"/proc/{self.worker_pid}/stat") as f:
                # "pid (comm) S ...": the name may hold spaces and parentheses.
                return f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return ""

    def round(self) -> list[str]:
        """Renew every held run once; return the ids found lost (dropped from the holds)."""
        now = time.monotonic()
        self.due = now + self.ttl_s / 3
        until = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=self.ttl_s)
        lost: list[str] = []
        wall = time.time()
        for owner in {h.owner for h in self.holds.values()}:
            # A slot past its call's deadline is hung: its lease is left to expire. Held
            # still, so a "lost" reaches the worker once the run is recovered elsewhere.
            ids = [i for i, h in self.holds.items() if h.owner == owner
                   and (h.deadline is None or h.deadline > wall)]
            overdue = [i for i, h in self.holds.items() if h.owner == owner
                       and h.deadline is not None and h.deadline <= wall]
            if overdue:
                _, still = self._renew([], owner, until, check=overdue)
                for run_id in overdue:
                    if run_id not in still:
                        del self.holds[run_id]
                        lost.append(run_id)
            if not ids:
                continue
            renewed, still = self._renew(ids, owner, until)
            for run_id in ids:
                hold = self.holds[run_id]
                if run_id in renewed:
                    hold.matched = True
                elif run_id in still:
                    self.due = min(self.due, now + _RETRY_S)
                elif hold.matched:
                    del self.holds[run_id]
                    lost.append(run_id)
                # else a claim still in flight: it matches next round, or the worker releases it
        return lost

    def _renew(self, ids: list[str], owner: str, until: dt.datetime,
               check: list[str] = ()) -> tuple[set, set]:
        """Renew ``ids``; return (renewed, still held among the rest of ``ids`` and ``check``)."""
        if self.conn is None or self.conn.closed:
            # Never prepared: a transaction pooler (runs.pooler) keeps no prepared statements.
            self.conn = PqConnection(self.dsn)
        renewed: set = set()
        if ids:
            rows = self.conn.query(_RENEW, [until.isoformat(), _uuid_array(ids), owner])
            renewed = {row[0] for row in rows}
        rest = [i for i in ids if i not in renewed] + list(check)
        still: set = set()
        if rest:
            still = {row[0] for row in self.conn.query(_STILL_HELD, [_uuid_array(rest), owner])}
        return renewed, still


def _uuid_array(ids: list[str]) -> str:
    """Return ``ids`` as a PostgreSQL array literal (run ids: hex digits and dashes only)."""
    return "{" + ",".join(ids) + "}"


def _say(text: str) -> None:
    sys.stderr.write(f"lease keeper {os.getpid()}: {text}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    """Keep the worker's leases until it is gone; the DSN comes in AGENTOPS_KEEPER_DSN."""
    parser = argparse.ArgumentParser(prog="keeper_main")
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("--worker-pid", type=int, required=True)
    args = parser.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    keeper = Keeper(os.environ["AGENTOPS_KEEPER_DSN"], args.ttl, args.worker_pid)
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], _POLL_S)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0  # the worker closed the pipe: it stopped or died
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                keeper.command(line.decode())
        state = keeper.worker_state()
        if not state or state == "Z":
            return 0
        if state in "Tt" or time.monotonic() < keeper.due or not keeper.holds:
            continue  # a stopped worker's leases must expire: renew nothing
        if not _renew_and_report(keeper):
            return 0


def _renew_and_report(keeper: Keeper) -> bool:
    """Run one renewal round and print the lost runs; return False once the worker is gone."""
    try:
        lost = keeper.round()
    except PqError as exc:  # the database is away: retry soon on a new connection
        _say(f"renewal of {len(keeper.holds)} leases failed: {exc}")
        if keeper.conn is not None:
            keeper.conn.close()
        keeper.due = time.monotonic() + _RETRY_S
        return True
    if lost:
        try:
            sys.stdout.write("".join(f"lost {run_id}\n" for run_id in lost))
            sys.stdout.flush()
        except BrokenPipeError:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
