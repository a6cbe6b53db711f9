"""Memory budget: a worker runs a tool with 200 MB of output and its peak RSS stays bounded.

The worker runs in a subprocess so its peak RSS (``resource.getrusage``) is its own. The tool
writes its output to a temporary file and returns the open file as ``ToolResult.log``; the
engine streams it to the artifact store in 1 MiB chunks and keeps only facts and summary.
"""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

OUTPUT_BYTES = 200 * 1024 * 1024
# The worker process (Django, the engine, the test agent) peaks at 125-145 MB before the tool
# runs (SQLite / PostgreSQL); the 200 MB output may add at most PEAK_GROWTH_MB on top (measured:
# 0), and the whole worker stays under PEAK_RSS_MB -- less than the output alone.
PEAK_RSS_MB = 200
PEAK_GROWTH_MB = 40

CHILD = r"""
import json, resource, sys, tempfile
import django
django.setup()
from django.test import override_settings

def peak_mb():
    # VmHWM is this process image's own high-water mark; ru_maxrss would also count the
    # parent's memory at fork time (Linux keeps it across exec), i.e. the test runner's.
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

size, artifacts = int(sys.argv[1]), sys.argv[2]
storages = {"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                          "OPTIONS": {"location": artifacts}}}
with override_settings(STORAGES=storages, AGENTOPS_ENQUEUE_TICKS=False, AGENTOPS_AGENTS=[]):
    from agentops.agents import Agent, StepSpec, registry
    from agentops.llm.scripted import ScriptedModel, call, say
    from agentops.tools import ToolResult, tool
    from ledger.models import Artifact, ToolCall
    from runs.engine.runtime.loop import run_tick
    from runs.engine.runtime.snapshots import load_state
    from runs.services import run_start

    @tool(effect="read")
    def export(ctx, table: str) -> ToolResult:
        "Export a whole table."
        fh = tempfile.TemporaryFile()
        line = b"x" * 1023 + b"\n"
        for _ in range(size // 1024):
            fh.write(line)
        return ToolResult(facts={"bytes": size, "lines": size // 1024},
                          summary=f"exported {size} bytes", log=fh)

    script = {"dump": [call("export", table="t"), say("exported")]}
    registry.register(Agent(name="exporter", version="1", system_prompt="s", tools=[export],
                            plan=[StepSpec("dump")], model=lambda: ScriptedModel(script)))
    run = run_start(agent="exporter", goal="export the table")
    baseline = peak_mb()
    for _ in range(20):
        run.refresh_from_db()
        if run.status not in ("queued", "running"):
            break
        run_tick(run.pk, worker="memory-test")
    row = ToolCall.objects.get(run=run)
    state = load_state(run.pk)
    print(json.dumps({"status": run.status, "baseline_mb": baseline, "peak_mb": peak_mb(),
                      "artifact_size": Artifact.objects.get(pk=row.artifact_sha256).size,
                      "state_bytes": len(json.dumps(state)), "summary": row.summary}))
"""


def _child_database_url(tmp_path: Path) -> str:
    """Return a database URL the child can use: a file copy of SQLite, or the same PostgreSQL."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        target = sqlite3.connect(tmp_path / "worker.sqlite3")
        connection.connection.backup(target)
        target.close()
        return f"sqlite:///{tmp_path / 'worker.sqlite3'}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_200_mb_tool_output_keeps_the_worker_under_its_peak_memory(tmp_path):
    env = {**os.environ, "DATABASE_URL": _child_database_url(tmp_path), "AGENTOPS_AGENTS": "",
           "DJANGO_SETTINGS_MODULE": "agentops.settings", "AGENTOPS_ENV": "test"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(OUTPUT_BYTES), str(tmp_path / "artifacts")],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"worker peak RSS {report['peak_mb']:.0f} MB (baseline {report['baseline_mb']:.0f} MB) "
          f"for a {OUTPUT_BYTES >> 20} MB tool output")
    assert report["status"] == "succeeded"
    assert report["artifact_size"] == OUTPUT_BYTES
    assert report["state_bytes"] < 20_000 and report["summary"] == f"exported {OUTPUT_BYTES} bytes"
    assert report["peak_mb"] < PEAK_RSS_MB
    assert report["peak_mb"] - report["baseline_mb"] < PEAK_GROWTH_MB
