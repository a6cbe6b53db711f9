"""The lease keeper process: renews a worker host's run leases outside its interpreters' locks.

A q2 worker process with hundreds of run slots (runs.slots) keeps their leases alive even
while its threads queue for the GIL for seconds: it tells this small program which runs it
holds (runs.engine.runtime.keeper). One keeper serves every q2 process of a worker host: it
listens on an abstract Unix socket named from a hash of the database, the lease TTL, the
user and the host's process group, and each worker process connects to it. The keeper
imports the standard library only (no Django, not even psycopg: it calls libpq through
ctypes, runs.engine.runtime.keeper_pq), so it starts in a few tens of milliseconds and holds
~17 MB, once per host rather than once per q2 process.

The first worker that needs it starts it (``--detach``): it binds the socket, then forks
and its first process exits, so the keeper is no worker's child (it outlives the worker that
started it) yet stays in the host's process group (signalled, stopped and counted with its
host). The bind is the lock: a second keeper started at the same time finds the name taken
and exits, and its worker connects to the first.

Protocol, one line each, worker to keeper: ``hold <run id> <owner>`` / ``release <run id>
<owner>``; ``call <run id> <owner> <deadline>`` / ``done <run id> <owner>`` around a tool
call of the run (``deadline``: Unix time). Keeper to worker: ``lost <run id>`` for a run no
longer leased to its owner (recovered, claimed by another worker, cancelled, ended), sent
only to the worker that held it; the worker cancels that run's tool tokens. The kernel
tells the keeper who connected (SO_PEERCRED): the worker's pid, and its user, which must be
the keeper's own.

Per worker, as when each had a keeper of its own:

- it pauses with its worker: each round reads ``/proc/<worker pid>/stat``; a stopped worker
  (state T, SIGSTOP or a debugger) gets nothing renewed, so its leases expire and the
  sweeper recovers its runs, as for a frozen VM, while the other workers' are renewed;
- a dead worker's holds go at once: its socket closes with it (even on SIGKILL), and the
  keeper drops everything it held, so a SIGKILLed worker leaves nothing renewed;
- a hung worker: a slot still inside a call past its deadline (the attempt's hard deadline,
  runs.engine.runtime.fencing: its timeout, or the promised default for a tool that
  declares none) is not renewed any more, though its process runs on; its lease expires and
  the sweeper recovers the run elsewhere. The slot, if it ever comes back, finds at its
  next commit that the run is no longer its own (LeaseLost).

Every ``ttl / 3`` s it renews every held run in one statement per owner, matching run id,
owner and status ``running`` (never the version: the slot's own commits bump it
meanwhile, and renewal never bumps it, so the fence is unchanged). A row locked right now
is being committed by its slot: SKIP LOCKED passes over it and it is retried 0.2 s later,
not reported lost. A hold whose run has never matched yet is a claim still in flight (the
worker holds a run before claiming it, so the first renewal is on time however long the
claim waits for a pooled connection): it is tried again every round and never reported
lost; the worker releases it if the claim fails.

The expiry is this host's wall clock + TTL, the clock the worker's claim and every host's
sweeper (``lease_expires_at < clock.now()``) read, so all writers of the column agree. Its
session is named ``agentops-lease-keeper-<keeper pid>``, not after a worker: release on death
(runs.engine.runtime.recovery) must see a worker's own sessions vanish with it.

It exits once no worker has been connected for ``_IDLE_EXIT_S`` (an orphan renews nothing,
and holds no session long). It ignores SIGTERM and SIGINT (sent to the whole process group
when a worker host stops): the workers drain their slots after those, and their leases must
be kept until they exit.
"""
from __future__ import annotations

import argparse
import datetime as dt
import errno
import os
import select
import signal
import socket
import struct
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
_IDLE_EXIT_S = 2.0  # no worker connected this long: exit (the next one to need it restarts it)
_CRED = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


class Hold:
    """A run this keeper renews for one owner (a plain class: dataclasses imports inspect,
    ast and dis, a few MB in every keeper)."""

    __slots__ = ("owner", "matched", "deadline")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.matched = False  # renewed at least once: from then on a miss means lost
        self.deadline: float | None = None  # inside a call until then (Unix time); None: no call


class Worker:
    """One connected worker process: its socket, pid, held runs and lines not sent yet."""

    __slots__ = ("sock", "fd", "pid", "holds", "inbox", "outbox")

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.fd, self.pid = sock, sock.fileno(), pid
        self.holds: dict[str, Hold] = {}
        self.inbox = b""
        self.outbox = b""

    def state(self) -> str:
        """Return the worker's process state letter ('' once it is gone)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                # "pid (comm) S ...": the name may hold spaces and parentheses.
                return f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return ""


class Keeper:
    """The connected workers, their held runs and one renewal round; I/O lives in ``serve``."""

    def __init__(self, dsn: str, ttl_s: float) -> None:
        self.dsn, self.ttl_s = dsn, ttl_s
        self.workers: dict[int, Worker] = {}  # by socket fd
        self.conn: PqConnection | None = None
        self.due = time.monotonic()

    def command(self, worker: Worker, line: str) -> None:
        """Apply one ``hold``/``release``/``call``/``done`` line from ``worker``."""
        parts = line.split()
        if len(parts) not in (3, 4):
            return
        verb, run_id, owner = parts[:3]
        hold = worker.holds.get(run_id)
        if verb == "hold":
            worker.holds[run_id] = Hold(owner=owner)
            self.due = min(self.due, time.monotonic() + self.ttl_s / 3)
        elif hold is None or hold.owner != owner:
            return
        elif verb == "release":
            del worker.holds[run_id]
        elif verb == "call" and len(parts) == 4:
            try:
                hold.deadline = float(parts[3])
            except ValueError:
                _say(f"ignored a call line with a bad deadline: {line.strip()!r}")
        elif verb == "done":
            hold.deadline = None

    def drop(self, worker: Worker) -> None:
        """Forget a worker that is gone, and every run it held (renewed no more)."""
        if self.workers.get(worker.fd) is worker:
            del self.workers[worker.fd]
        worker.sock.close()

    def round(self) -> None:
        """Renew the held runs of every live, running worker once; queue their ``lost`` lines."""
        self.due = time.monotonic() + self.ttl_s / 3
        until = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=self.ttl_s)
        for worker in list(self.workers.values()):
            state = worker.state()
            if not state or state == "Z":
                self.drop(worker)
            elif state not in "Tt" and worker.holds:  # a stopped worker's leases must expire
                lost = self.worker_round(worker, until)
                worker.outbox += "".join(f"lost {run_id}\n" for run_id in lost).encode()

    def worker_round(self, worker: Worker, until: dt.datetime) -> list[str]:
        """Renew ``worker``'s held runs; return the ids found lost (dropped from its holds)."""
        holds, lost, wall = worker.holds, [], time.time()
        for owner in {h.owner for h in holds.values()}:
            # A slot past its call's deadline is hung: its lease is left to expire. Held
            # still, so a "lost" reaches the worker once the run is recovered elsewhere.
            ids = [i for i, h in holds.items() if h.owner == owner
                   and (h.deadline is None or h.deadline > wall)]
            overdue = [i for i, h in holds.items() if h.owner == owner
                       and h.deadline is not None and h.deadline <= wall]
            if overdue:
                _, still = self._renew([], owner, until, check=overdue)
                for run_id in overdue:
                    if run_id not in still:
                        del holds[run_id]
                        lost.append(run_id)
            if not ids:
                continue
            renewed, still = self._renew(ids, owner, until)
            for run_id in ids:
                hold = holds[run_id]
                if run_id in renewed:
                    hold.matched = True
                elif run_id in still:
                    self.due = min(self.due, time.monotonic() + _RETRY_S)
                elif hold.matched:
                    del holds[run_id]
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


def _accept(keeper: Keeper, listener: socket.socket) -> None:
    """Take a new worker; the kernel says who it is (only this user's processes are served)."""
    try:
        sock, _ = listener.accept()
    except OSError:
        return
    pid, uid, _ = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                               _CRED.size))
    if uid != os.getuid():
        sock.close()
        return
    sock.setblocking(False)
    worker = Worker(sock, pid)
    keeper.workers[worker.fd] = worker


def _receive(keeper: Keeper, worker: Worker) -> None:
    """Apply what ``worker`` sent; drop it once its socket closed (it exited or died)."""
    try:
        chunk = worker.sock.recv(65536)
    except BlockingIOError:
        return
    except OSError:
        chunk = b""
    if not chunk:
        keeper.drop(worker)
        return
    *lines, worker.inbox = (worker.inbox + chunk).split(b"\n")
    for line in lines:
        keeper.command(worker, line.decode())


def _flush(keeper: Keeper, worker: Worker) -> None:
    """Send what ``worker`` can take now (a stopped worker's socket may be full: never block)."""
    try:
        worker.outbox = worker.outbox[worker.sock.send(worker.outbox):]
    except BlockingIOError:
        return
    except OSError:
        keeper.drop(worker)


def serve(keeper: Keeper, listener: socket.socket) -> int:
    """Serve workers until none has been connected for ``_IDLE_EXIT_S``."""
    idle_since = time.monotonic()
    while True:
        socks = dict(keeper.workers)
        writing = [fd for fd, w in socks.items() if w.outbox]
        readable, writable, _ = select.select([listener, *socks], writing, [], _POLL_S)
        for fd in readable:
            if fd is listener:
                _accept(keeper, listener)
            elif keeper.workers.get(fd) is socks[fd]:  # not dropped meanwhile
                _receive(keeper, socks[fd])
        for fd in writable:
            if keeper.workers.get(fd) is socks[fd]:
                _flush(keeper, socks[fd])
        now = time.monotonic()
        if keeper.workers:
            idle_since = now
        elif now - idle_since > _IDLE_EXIT_S:
            return 0
        if now >= keeper.due and any(w.holds for w in keeper.workers.values()):
            _round(keeper)


def _round(keeper: Keeper) -> None:
    """Run one renewal round; a database away is retried soon on a new connection."""
    try:
        keeper.round()
    except PqError as exc:
        held = sum(len(w.holds) for w in keeper.workers.values())
        _say(f"renewal of {held} leases failed: {exc}")
        if keeper.conn is not None:
            keeper.conn.close()
        keeper.due = time.monotonic() + _RETRY_S


def listen(address: str) -> socket.socket | None:
    """Bind this host's keeper address (abstract: no file to go stale); None if it is taken."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None  # another keeper serves this host: its workers connect to it
        raise
    sock.listen(64)
    return sock


def main(argv: list[str] | None = None) -> int:
    """Keep the leases of the workers that connect to ``--address``; the DSN comes in
    AGENTOPS_KEEPER_DSN."""
    parser = argparse.ArgumentParser(prog="keeper_main")
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--detach", action="store_true")
    parser.add_argument("--started-by", type=int, default=0)  # for ps and tests: informative
    args = parser.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    listener = listen(args.address)
    if listener is None:
        return 0
    if args.detach and os.fork() > 0:
        os._exit(0)  # the worker waits for this exit: the address is bound by now
    name = f"agentops-lease-keeper-{os.getpid()}"
    return serve(Keeper(f"{os.environ['AGENTOPS_KEEPER_DSN']} application_name={name}", args.ttl),
                 listener)


if __name__ == "__main__":
    sys.exit(main())
