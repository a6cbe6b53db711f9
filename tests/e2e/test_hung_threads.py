"""Hung tool threads (issue 39 item 6): a real worker whose slot is stuck forever in a tool
that declares no timeout is replaced by its q2 cluster once it holds
AGENTOPS_HUNG_THREADS_MAX such threads; afterwards the q2 process's thread count is a fresh
process's again, and no run was lost or repeated."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)$", status, re.M).group(1))


def _owner_pid(run_id) -> int:
    return int(Run.objects.get(pk=run_id).lease_owner.rsplit(":", 1)[1])


def test_hung_thread_worker_process_is_replaced_and_no_run_is_lost_or_repeated(
        settings, tmp_path):
    from tests import chaos_agents

    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    settings.AGENTOPS_SWEEP_INTERVAL_S = 0.5
    chaos_agents.world_create()
    prom = tmp_path / "prom"  # the host's processes add their counters up here
    prom.mkdir()
    host = Worker("hung-threads", tmp_path, AGENTOPS_WORKERS="1", AGENTOPS_TOOL_TIMEOUT_S="2",
                  AGENTOPS_HUNG_THREADS_MAX="1", AGENTOPS_TICK_SLICE_S="3", LOG_LEVEL="INFO",
                  PROMETHEUS_MULTIPROC_DIR=str(prom))
    host.start()
    try:
        # A normal run first: the q2 process's threads at rest after slotted work.
        warm = run_start(agent="chaos_idem", goal="warm up", input={"order": "warm"}).pk
        wait_until(lambda: Run.objects.get(pk=warm).status == "succeeded", 60, "the warm-up run")
        first_pid = _owner_pid_after(warm)
        time.sleep(1.0)
        normal = _threads(first_pid)

        marker = tmp_path / "hang-marker"
        hung = run_start(agent="chaos_hang", goal="hang", input={"marker": str(marker)}).pk
        wait_until(marker.exists, 30, "the tool to start (and hang)")
        assert _owner_pid(hung) == first_pid
        others = [run_start(agent="chaos_idem", goal=f"pay {i}", input={"order": f"o{i}"}).pk
                  for i in range(6)]
        wait_until(lambda: first_pid not in host.pids(), 60,
                   "the process holding the hung thread to exit")
        wait_until(lambda: not Run.objects.filter(pk__in=[hung, *others]).exclude(
            status="succeeded").exists(), 90, "every run to finish")
        new_pid = _owner_pid_after(hung)
        assert new_pid != first_pid and new_pid in host.pids()
        time.sleep(1.0)
        after = _threads(new_pid)
        assert host.proc.poll() is None, "the worker host itself stays up"
    finally:
        host.stop()
    log = host.log_path.read_text(errors="replace")
    assert "hung tool threads (limit 1" in log and "exits now to be replaced" in log
    assert "reincarnated worker" in log, "the q2 sentinel started a new process"
    print(f"\nhung threads: q2 process threads at rest {normal}, after replacement {after}")
    assert after <= normal, (normal, after)
    assert _replacements(prom) == 1.0
    rows = chaos_agents.world_rows()
    charged = [k for t, k, _ in rows if t == "charge"]
    assert len(charged) == len(set(charged)) == 7, rows  # every payment once, none lost
    recovered = Event.objects.filter(run_id=hung, type="run.recovered").count()
    assert recovered == 1, recovered
    assert Event.objects.filter(run_id=hung, type="run.status", data__to="succeeded").count() == 1
    chaos_agents.world_drop()


def test_hung_thread_a_slow_tool_that_heartbeats_is_not_hung(settings, tmp_path):
    """A tool past its default timeout that calls ctx.heartbeat() keeps its lease and its
    process: it is slow, not hung."""
    import tests.chaos_agents  # noqa: F401  (registers chaos_beat in this process too)

    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    settings.AGENTOPS_SWEEP_INTERVAL_S = 0.5
    host = Worker("beating", tmp_path, AGENTOPS_WORKERS="1", AGENTOPS_TOOL_TIMEOUT_S="2",
                  AGENTOPS_HUNG_THREADS_MAX="1", LOG_LEVEL="INFO")
    host.start()
    try:
        run_id = run_start(agent="chaos_beat", goal="slow", input={"seconds": 9}).pk
        wait_until(lambda: Run.objects.get(pk=run_id).status == "succeeded", 90,
                   "the slow run to finish")
        pids = host.pids()
    finally:
        host.stop()
    assert _owner_pid_after(run_id) in pids
    assert not Event.objects.filter(run_id=run_id, type="run.recovered").exists()
    log = host.log_path.read_text(errors="replace")
    assert "hung tool threads" not in log and "reincarnated worker" not in log


def _owner_pid_after(run_id) -> int:
    """Return the pid of the q2 process that claimed ``run_id`` last."""
    owners = [d["owner"] for d in Event.objects.filter(run_id=run_id, type="run.status")
              .order_by("seq").values_list("data", flat=True)
              if d.get("to") == "running" and d.get("owner")]
    assert owners, "the run was never claimed"
    return int(owners[-1].rsplit(":", 1)[1])


def _replacements(prom: Path) -> float:
    """Return agentops_worker_replacements_total{reason="hung_threads"} across the host."""
    import subprocess
    import sys

    show = ("import sys; from agentops.observability import metrics as m; "
            "sys.stdout.write(m.metrics_exposition().decode())")
    out = subprocess.run([sys.executable, "-c", show], check=True, timeout=60, text=True,
                         capture_output=True,
                         env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(prom)}).stdout
    found = re.search(r'^agentops_worker_replacements_total\{reason="hung_threads"\} (\S+)$',
                      out, re.M)
    return float(found.group(1)) if found else 0.0
