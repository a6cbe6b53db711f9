"""A real worker whose run's tool returns ever larger results blocks that run and lives on.

The worker process (``manage.py agentops worker``, PostgreSQL) runs with a real address-space
limit (RLIMIT_AS, 4 GiB) and AGENTOPS_MEMORY_SHARE 2.5% (about 102 MiB); its tool doubles the
text it returns each call (64 KiB, 128 KiB, ... 256 MiB). The run blocks as ``memory_budget``
at the first result past its share, with the sizes; the same worker processes then serve
another run to success.
"""
from __future__ import annotations

import subprocess

import pytest

from ledger.models import ToolCall
from runs.models import Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ADDRESS_SPACE = 4 << 30
SHARE = "0.025"
BUDGET = int(ADDRESS_SPACE * 0.025)


@pytest.fixture(autouse=True)
def _agents(settings):
    """The agents registered in this process too (run_start looks them up)."""
    import tests.memory_agents  # noqa: F401

    settings.AGENTOPS_ENQUEUE_TICKS = True


def _stopped(run_id, within_s: float) -> Run:
    return wait_until(lambda: Run.objects.filter(pk=run_id).exclude(
        status__in=["queued", "running", "waiting"]).first(), within_s, f"run {run_id} to stop")


def _workers(worker: Worker) -> set[int]:
    """Return the pids of the worker's q2 processes (lease keepers come and go by design)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(worker.proc.pid)],
                         capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines() if "agentops worker" in line}


def test_a_growing_result_blocks_its_run_and_the_worker_serves_the_next(tmp_path):
    worker = Worker("mem", tmp_path, address_space=ADDRESS_SPACE,
                    AGENTOPS_AGENTS="tests.memory_agents", AGENTOPS_MEMORY_SHARE=SHARE,
                    AGENTOPS_MEDIA_ROOT=str(tmp_path / "media"), LOG_LEVEL="WARNING")
    worker.start()
    try:
        grown = _stopped(run_start(agent="mem_grower", goal="read the reports").pk, 180)
        pids = _workers(worker)
        small = _stopped(run_start(agent="mem_small", goal="read one report").pk, 60)
        alive = worker.proc.poll() is None and _workers(worker) == pids
    finally:
        worker.stop()
    assert grown.status == "blocked", (grown.status, grown.attention_detail)
    assert grown.attention_reason == "memory_budget"
    detail = grown.attention_detail
    assert (f"AGENTOPS_MEMORY_SHARE 2.5% of this process's {ADDRESS_SPACE:,} bytes (RLIMIT_AS) "
            f"is {BUDGET:,}") in detail, detail
    kept = list(ToolCall.objects.filter(run=grown, status="succeeded").order_by("created_at")
                .values_list("facts__kib", flat=True))
    refused = ToolCall.objects.get(run=grown, status="failed")
    assert kept[-1] == 64 * 1024 and refused.args["kib"] == 128 * 1024, (kept, refused.args)
    assert refused.error_class == "memory_budget" and not refused.artifact_sha256
    assert grown.recoveries == 0  # no worker died on it
    assert small.status == "succeeded", (small.status, small.attention_detail)
    assert alive, "a worker process died and was replaced"
    log = worker.log_path.read_text(errors="replace")
    assert "MemoryError" not in log and "Traceback" not in log, log[-2000:]
