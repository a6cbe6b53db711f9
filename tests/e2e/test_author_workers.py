"""An author's mistakes on a real worker: a broken agent module, a lazily failing dependency,
and a killed worker process whose q2 processes must not live on as orphans.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

import tests.author_agents  # noqa: F401  (registers the agents in this process too)
from runs.models import Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _up(worker: Worker, timeout_s: float = 60.0) -> None:
    wait_until(lambda: "worker up" in worker.log_path.read_text(errors="replace")
               and len(worker.pids()) >= 3, timeout_s, "the worker to start")


@pytest.mark.parametrize(("module", "error"), [
    ("tests.broken_agents", "No module named 'agentops_missing_supplier_sdk'"),
    ("tests.author_twin_agents", "agent author_good@1 is registered twice with different "
                                 "definitions: first in tests.author_agents, then in "
                                 "tests.author_twin_agents"),
], ids=["config_error", "registered_twice"])
def test_worker_with_broken_agent_module_exits_naming_it(tmp_path, module, error):
    worker = Worker("broken", tmp_path, AGENTOPS_AGENTS=f"tests.author_agents,{module}")
    worker.start()
    try:
        code = worker.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a worker with an agent module that does not import kept running")
    finally:
        worker.kill()
    log = worker.log_path.read_text(errors="replace")
    assert code != 0
    assert "worker up" not in log
    assert f"agent module {module} failed to import" in log
    assert error in log
    assert "Traceback" not in log


def test_lazy_dependency_blocks_only_its_agents_runs_config_error(tmp_path):
    worker = Worker("lazy", tmp_path, AGENTOPS_AGENTS="tests.author_agents")
    lazy = run_start(agent="author_lazy", goal="find bolts", input={}, actor="t")
    good = run_start(agent="author_good", goal="find bolts", input={}, actor="t")
    worker.start()
    try:
        _up(worker)

        def ended():
            runs = {r.pk: r for r in Run.objects.filter(pk__in=[lazy.pk, good.pk])}
            done = all(r.status not in ("queued", "running") for r in runs.values())
            return runs if done else None

        runs = wait_until(ended, 60, "both runs to stop")
    finally:
        worker.stop()
    assert runs[good.pk].status == "succeeded"
    blocked = runs[lazy.pk]
    assert blocked.status == "blocked", (blocked.status, blocked.attention_detail)
    assert blocked.attention_reason != "recovery_limit"
    assert "No module named 'agentops_missing_supplier_sdk'" in blocked.attention_detail


def test_killed_worker_leaves_no_orphan_processes(tmp_path):
    worker = Worker("orphan", tmp_path)
    worker.start()
    try:
        _up(worker)
        group = worker.pids() - {worker.proc.pid}
        assert group, "the q2 cluster's processes were not found"
        os.kill(worker.proc.pid, signal.SIGKILL)  # the main process only, as the OOM killer
        worker.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(group), f"orphans still running: {sorted(_alive(group))}"
    finally:
        worker.kill()


def _alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    out.add(pid)
        except FileNotFoundError:
            pass
    return out
