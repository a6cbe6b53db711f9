"""A PostgreSQL primary and its streaming standby of their own, for the read-replica tests.

    pair = Pair(tmp).start()        # initdb + primary, pg_basebackup -R + standby, streaming
    pair.synchronous()              # every commit waits for the standby from now on
    pair.url("primary"), pair.url("standby"), pair.failover_url()   # postgres:// URLs
    pair.promote()                  # stop the primary hard, promote the standby
    pair.stop()

Both servers listen on free loopback ports and trust local users. Once ``synchronous()``
is called the primary waits for the standby on every commit (synchronous_commit=on,
synchronous_standby_names='standby'), the setting docs/deploy.md names as the way to lose
nothing in a failover. Servers run as the
``postgres`` account when this process is root (initdb refuses root). Binaries are Debian's
PostgreSQL 15 (/usr/lib/postgresql/15/bin); ``missing()`` says why they cannot run here.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"
STANDBY_NAME = "standby"
STANDBY_MAX_CONNECTIONS = 150  # the primary's is 120 (_COMMON)
_COMMON = """
listen_addresses = '127.0.0.1'
unix_socket_directories = '{folder}'
max_connections = 120
shared_buffers = 32MB
fsync = off
full_page_writes = off
wal_level = replica
max_wal_senders = 4
hot_standby = on
wal_receiver_status_interval = 1s
log_min_messages = warning
"""


def missing() -> str:
    """Return why a pair cannot start on this machine ('' when it can)."""
    for name in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
        if not (BIN / name).exists():
            return f"{BIN / name} is missing (Debian's postgresql-15)"
    return ""


def free_port() -> int:
    """Return a loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pair:
    """A primary and a standby streaming from it, each with its data folder and port."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="agentops-pair-", dir=folder))
        self.ports = {"primary": free_port(), "standby": free_port()}
        self.promoted = False
        self._run_as = pwd.getpwnam(USER) if os.geteuid() == 0 else None
        if self._run_as:
            os.chown(self.folder, self._run_as.pw_uid, self._run_as.pw_gid)

    def _cmd(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a PostgreSQL binary (as the postgres account when root)."""
        user = self._run_as.pw_name if self._run_as else None
        done = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True,
                              user=user, stdin=subprocess.DEVNULL, cwd=self.folder)
        if check and done.returncode:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    def data(self, name: str) -> Path:
        """Return the data folder of ``primary`` or ``standby``."""
        return self.folder / name

    def start(self) -> Pair:
        """Create the primary, its database ``agentops``, then the standby streaming from it."""
        primary = self.data("primary")
        self._cmd("initdb", "-D", str(primary), "-U", USER, "-A", "trust", "--no-sync",
                  "--no-instructions", "-E", "UTF8")
        self._configure(primary, "primary", "synchronous_commit = on\n")
        self._cmd("pg_ctl", "-D", str(primary), "-l", str(self.folder / "primary.log"), "-w",
                  "start")
        with psycopg.connect(self.url("primary", "postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE agentops")
        standby = self.data("standby")
        self._cmd("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.ports["primary"]),
                  "-U", USER, "-D", str(standby), "-R", "-X", "stream", "-c", "fast", "--no-sync")
        # The standby once promoted has no standby of its own: it must not wait for one.
        # Its own max_connections (a standby may allow more than its primary, never fewer).
        self._configure(standby, "standby", f"max_connections = {STANDBY_MAX_CONNECTIONS}\n"
                        "synchronous_standby_names = ''\nprimary_conninfo = "
                        f"'host=127.0.0.1 port={self.ports['primary']} user={USER} "
                        f"application_name={STANDBY_NAME}'\n")
        self._cmd("pg_ctl", "-D", str(standby), "-l", str(self.folder / "standby.log"), "-w",
                  "start")
        return self

    def synchronous(self) -> None:
        """Make every commit on the primary wait for the standby (wait until it does).

        Not before the standby streams: CREATE DATABASE above would wait forever.
        """
        self.sql("primary", f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
        self.sql("primary", "SELECT pg_reload_conf()")
        self._wait_sync()

    def _configure(self, data: Path, name: str, extra: str) -> None:
        conf = _COMMON.format(folder=self.folder) + f"port = {self.ports[name]}\n" + extra
        with open(data / "postgresql.auto.conf", "a") as f:
            f.write(conf)

    def _wait_sync(self, within_s: float = 20) -> None:
        deadline = time.monotonic() + within_s
        with psycopg.connect(self.url("primary", "postgres"), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT sync_state FROM pg_stat_replication "
                                   "WHERE application_name = %s", [STANDBY_NAME]).fetchone()
                if row and row[0] == "sync":
                    return
                time.sleep(0.05)
        raise RuntimeError(f"the standby did not stream in sync within {within_s}s: "
                           f"{self.log('standby')}")

    def url(self, name: str, database: str = "agentops") -> str:
        """Return the URL of ``database`` on ``primary`` or ``standby``."""
        return f"postgres://{USER}@127.0.0.1:{self.ports[name]}/{database}"

    def failover_url(self, database: str = "agentops") -> str:
        """Return a libpq multi-host URL: whichever of the two takes writes now."""
        ports = f"{self.ports['primary']},{self.ports['standby']}"
        return (f"postgres://{USER}@127.0.0.1,127.0.0.1/{database}"
                f"?port={ports}&target_session_attrs=read-write")

    def sql(self, name: str, query: str, params: list | None = None) -> list[tuple]:
        """Run one statement on ``name`` (autocommit) and return its rows."""
        with psycopg.connect(self.url(name), autocommit=True) as conn:
            cur = conn.execute(query, params or [])
            return cur.fetchall() if cur.description else []

    def promote(self) -> None:
        """Stop the primary at once (no shutdown checkpoint) and promote the standby."""
        self._cmd("pg_ctl", "-D", str(self.data("primary")), "-m", "immediate", "stop")
        self._cmd("pg_ctl", "-D", str(self.data("standby")), "-w", "promote")
        self.promoted = True

    def log(self, name: str) -> str:
        """Return the end of a server's log (for error messages)."""
        path = self.folder / f"{name}.log"
        return path.read_text()[-2000:] if path.exists() else "(no log)"

    def stop(self) -> None:
        """Stop both servers (whatever state they are in) and remove their folder."""
        for name in ("standby", "primary"):
            if (self.data(name) / "postmaster.pid").exists():
                self._cmd("pg_ctl", "-D", str(self.data(name)), "-m", "immediate", "stop",
                          check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
