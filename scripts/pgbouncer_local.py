"""A PgBouncer of its own in transaction mode, in front of a local PostgreSQL (tests, bench).

    with Bouncer(upstream_port=5432, pool_size=10, max_db_connections=40) as b:
        b.url("agentops")  # postgres://postgres@127.0.0.1:<free port>/agentops

Debian's pgbouncer (scripts/ensure_pgbouncer.sh installs it; ``ensure=True`` runs that when
it is missing) listens on a free loopback port, pool_mode=transaction, trusting the user
listed in its auth file, as the local PostgreSQL trusts it. PgBouncer refuses to run as
root: as root it is started with ``-u postgres`` and its folder is handed to that user.

Also a command: ``python scripts/pgbouncer_local.py [--pool-size N] [--max-db N]`` starts one,
prints its URL for the database ``agentops`` and runs until interrupted.
"""
from __future__ import annotations

import argparse
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CONFIG = """[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/userlist.txt
admin_users = {user}
pool_mode = transaction
max_client_conn = {max_client_conn}
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = {max_db}
ignore_startup_parameters = extra_float_digits
server_idle_timeout = 30
idle_transaction_timeout = {idle_tx}
logfile = {folder}/pgbouncer.log
log_connections = 0
log_disconnections = 0
"""


def pgbouncer_binary(*, ensure: bool) -> str:
    """Return the pgbouncer executable; with ``ensure``, install it first when it is missing."""
    found = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer"
                                          if os.path.exists("/usr/sbin/pgbouncer") else "")
    if not found and ensure:
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure_pgbouncer.sh")], check=True,
                       stdin=subprocess.DEVNULL)
        return pgbouncer_binary(ensure=False)
    if not found:
        raise FileNotFoundError("pgbouncer is not installed (run scripts/ensure_pgbouncer.sh)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bouncer:
    """One pgbouncer process and its folder (config, auth file, log)."""

    def __init__(self, *, upstream_host: str = "127.0.0.1", upstream_port: int = 5432,
                 user: str = "postgres", pool_size: int = 10, max_db_connections: int = 0,
                 max_client_conn: int = 1000, idle_transaction_timeout: int = 0,
                 ensure: bool = False) -> None:
        self.binary = pgbouncer_binary(ensure=ensure)
        self.user, self.port = user, _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="agentops-pgbouncer-"))
        (self.folder / "userlist.txt").write_text(f'"{user}" ""\n')
        (self.folder / "pgbouncer.ini").write_text(_CONFIG.format(
            host=upstream_host, port=upstream_port, user=user, listen=self.port,
            folder=self.folder, max_client_conn=max_client_conn, pool_size=pool_size, max_db=max_db_connections,
            idle_tx=idle_transaction_timeout))
        self.proc: subprocess.Popen | None = None

    def start(self) -> Bouncer:
        """Start pgbouncer and wait (up to 10 s) until it accepts connections."""
        command = [self.binary, str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:  # "PgBouncer should not run as root"
            account = pwd.getpwnam("postgres")
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", "postgres"]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.proc.returncode}): {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on port {self.port}: {self.log()}")

    def url(self, database: str) -> str:
        """Return the URL of ``database`` through this pgbouncer."""
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """Return the end of pgbouncer's log (for error messages)."""
        path = self.folder / "pgbouncer.log"
        return path.read_text()[-2000:] if path.exists() else "(no log)"

    def stop(self) -> None:
        """Stop pgbouncer (its server connections close with it) and remove its folder."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: immediate shutdown
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Bouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """Start one and run until interrupted (Ctrl-C)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--max-db", type=int, default=0, help="server connections per database")
    parser.add_argument("--upstream-port", type=int, default=5432)
    parser.add_argument("--idle-transaction-timeout", type=int, default=10,
                        help="seconds a client may sit idle inside a transaction")
    args = parser.parse_args()
    with Bouncer(upstream_port=args.upstream_port, pool_size=args.pool_size,
                 max_db_connections=args.max_db,
                 idle_transaction_timeout=args.idle_transaction_timeout,
                 ensure=os.environ.get("CI") == "true") as b:
        print(b.url("agentops"), flush=True)
        try:
            b.proc.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
