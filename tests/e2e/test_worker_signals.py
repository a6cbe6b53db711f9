"""``agentops worker`` stops on SIGTERM, whether the signal reaches its process or its group.

systemd (KillMode=control-group) and ``kill -TERM -PGID`` signal every process of the group
at once; q2's own handler then blocked forever on a stop event its dead sentinel had been
waiting on. A container runtime signals the main process only, which must stop q2 itself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.e2e.workers import Worker

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _started(worker: Worker, log_dir, timeout_s: float = 30.0) -> None:
    log = log_dir / f"{worker.name}-{worker.starts}.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "worker up" in log.read_text(errors="replace") and len(worker.pids()) >= 3:
            time.sleep(1.0)  # the q2 processes are waiting on the stop event by now
            return
        assert worker.proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.1)
    raise AssertionError(f"worker did not start: {log.read_text(errors='replace')}")


@pytest.mark.parametrize("target", ["group", "main process"])
def test_sigterm_stops_the_worker_and_all_its_processes(tmp_path, target):
    worker = Worker("sig", tmp_path)
    worker.start()
    try:
        _started(worker, tmp_path)
        group = worker.pids()
        if target == "group":
            os.killpg(worker.proc.pid, signal.SIGTERM)
        else:
            os.kill(worker.proc.pid, signal.SIGTERM)
        try:
            code = worker.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not stop within 40 s of SIGTERM to its {target}")
        assert code == 0
        deadline = time.monotonic() + 10
        while worker.pids() & group and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not worker.pids() & group, "processes of the worker outlived it"
    finally:
        worker.kill()
