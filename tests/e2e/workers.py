"""Real worker processes (``manage.py agentops worker``) against the live test database."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def worker_env(**extra: str) -> dict[str, str]:
    """Return the environment for a worker on the database this test process uses."""
    s = connection.settings_dict
    url = f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    env = {k: v for k, v in os.environ.items() if k != "TEST_DATABASE_NAME"}
    env.update(DATABASE_URL=url, AGENTOPS_AGENTS="tests.chaos_agents", AGENTOPS_WORKERS="2",
               AGENTOPS_LEASE_TTL_S=str(settings.AGENTOPS_LEASE_TTL_S),
               AGENTOPS_SWEEP_INTERVAL_S=str(settings.AGENTOPS_SWEEP_INTERVAL_S),
               AGENTOPS_TICK_SLICE_S="5", AGENTOPS_BACKOFF_BASE_S="0.2",
               AGENTOPS_BACKOFF_CAP_S="2", AGENTOPS_TOOL_TIMEOUT_S="2", LOG_LEVEL="ERROR",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


class Worker:
    """One worker host: a process group we can SIGKILL whole and start again."""

    def __init__(self, name: str, log_dir: Path, env: dict[str, str] | None = None, *,
                 address_space: int | None = None, **more_env: str) -> None:
        self.name, self.log_dir, self.proc = name, log_dir, None
        self.starts, self.env = 0, {**(env or {}), **more_env}
        self.address_space = address_space  # RLIMIT_AS of every process of the worker

    def start(self) -> None:
        """Start the worker in its own process group."""
        self.starts += 1
        log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "agentops", "worker"], cwd=ROOT,
            env=worker_env(**self.env),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=self._limit if self.address_space else None)

    def _limit(self) -> None:
        """Cap the worker's address space (runs in the child before it execs)."""
        resource.setrlimit(resource.RLIMIT_AS, (self.address_space, self.address_space))

    @property
    def log_path(self) -> Path:
        """Return the file the current start of this worker writes its output to."""
        return self.log_dir / f"{self.name}-{self.starts}.log"

    def pids(self) -> set[int]:
        """Return the pids of every process in the group (the q2 workers own leases)."""
        out = subprocess.run(["ps", "-o", "pid=", "-g", str(self.proc.pid)],
                             capture_output=True, text=True).stdout
        return {int(p) for p in out.split()}

    def kill(self) -> None:
        """SIGKILL the whole group: no handler runs, nothing is cleaned up."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP the whole group: a GC pause or a frozen VM; it keeps its connections."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the group (after ``pause``); harmless on a running or dead one."""
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
        except (ProcessLookupError, TypeError, AttributeError):
            pass

    def stop(self) -> None:
        """Stop the worker (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=8)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            self.kill()
        time.sleep(0.2)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_until(predicate, within_s: float, what: str):
    """Return the first truthy ``predicate()`` within ``within_s``; fail saying ``what``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out after {within_s}s waiting for {what}")
