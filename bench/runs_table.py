"""Runs-table queries at fleet scale: the queue's agent filter and the approvals inbox.

Seeds (once per size) its own database with BENCH_RUNS_TABLE_RUNS runs (500k) and no
events: the runs are cloned from one template run by a single INSERT ... SELECT, 13 agent
names (one of them on a handful of old runs only), one run in ten in a second team. Then
BENCH_RUNS_TABLE_PENDING pending approvals and BENCH_RUNS_TABLE_DECIDED decided ones, each
with its tool call. Then, for each selector the console calls, the SQL it sends is captured
and EXPLAIN ANALYZEd (median execution ms of 5, and the plan's scans), and the selector is
timed from Python (median of 20):

  agent_names    runs.selectors_lists.run_agent_names: the queue page's agent filter menu
  inbox_pending  approvals.selectors.approval_list_pending: the inbox's pending list
  inbox_decided  approvals.selectors.approval_list_decided: the inbox's recent decisions

each for an admin (every team) and for a member of the small team.

    BENCH_ENGINE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentops_bench_scale \\
        flock /tmp/agentops-bench.lock .venv/bin/python bench/runs_table.py
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import commit_floor, django_boot, emit, log

RUNS = int(os.environ.get("BENCH_RUNS_TABLE_RUNS") or 500_000)
PENDING = int(os.environ.get("BENCH_RUNS_TABLE_PENDING") or 2_500)
DECIDED = int(os.environ.get("BENCH_RUNS_TABLE_DECIDED") or 50_000)
AGENTS = 12
SMALL_TEAM = "fleet-small"
_SCAN = re.compile(r"(Seq Scan|Index Only Scan|Index Scan|Bitmap Heap Scan)(?: Backward)? "
                   r"(?:using (\S+) )?"
                   r"on (\S+)")


def _marker() -> str:
    return f"bench-runs-table:runs={RUNS}:pending={PENDING}:decided={DECIDED}"


def _seed() -> None:
    """Fill the database unless it holds this size's seed already."""
    from django.db import connection, transaction

    from runs.models import Run, Team

    if Run.objects.filter(idempotency_key=_marker()).exists():
        return
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table in ("approvals_approval", "ledger_toolcall", "runs_run"):
            cursor.execute(f"DELETE FROM {table}")
        small, _ = Team.objects.get_or_create(slug=SMALL_TEAM, defaults={"name": "Small"})
        template = Run.objects.create(agent_name="agent-0", agent_version="1", goal="fleet run")
        _clone_runs(cursor, template, small.pk)
        Run.objects.filter(pk=template.pk).update(idempotency_key=_marker())
        _approvals()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run, ledger_toolcall, approvals_approval")
    log(f"seeded {RUNS:,} runs in {time.perf_counter() - started:.1f} s")


def _clone_runs(cursor: Any, template: Any, small_team: int) -> None:
    from runs.models import Run

    over = {
        "id": "gen_random_uuid()",
        "agent_name": f"CASE WHEN g %% 100000 = 7 THEN 'retired-bot' "
                      f"ELSE 'agent-' || (g %% {AGENTS}) END",
        "status": "CASE WHEN g %% 100 < 3 THEN 'waiting' WHEN g %% 100 < 8 THEN 'blocked' "
                  "WHEN g %% 100 < 10 THEN 'running' ELSE 'succeeded' END",
        "wait_kind": "CASE WHEN g %% 100 < 3 THEN 'approval' ELSE '' END",
        "team_id": f"CASE WHEN g %% 10 = 0 THEN {small_team} ELSE t.team_id END",
        "created_at": "t.created_at - g * interval '5 seconds'",
        "updated_at": "t.updated_at - g * interval '5 seconds'",
        "idempotency_key": "NULL",
    }
    columns = [f.column for f in Run._meta.concrete_fields]
    values = [over.get(c, f"t.{c}") for c in columns]
    cursor.execute(f"INSERT INTO runs_run ({', '.join(columns)}) SELECT {', '.join(values)} "
                   f"FROM runs_run t, generate_series(1, %s) g WHERE t.id = %s",
                   [RUNS - 1, template.pk])


def _approvals() -> None:
    from approvals.models import Approval
    from ledger.models import ToolCall
    from runs.models import Run

    now = dt.datetime.now(dt.UTC)
    runs = list(Run.objects.order_by().values_list("pk", flat=True)[:PENDING + DECIDED])
    calls = [ToolCall(tool_call_id=f"tc_fleet_{i}", run_id=run_id, step_key="s1", turn=1,
                      tool="send_email", args={"n": i}, args_hash="0" * 64,
                      idempotency_key=hashlib.sha256(f"fleet:{i}".encode()).hexdigest(),
                      effect="write", reversibility="irreversible", status="awaiting_approval")
             for i, run_id in enumerate(runs)]
    calls = ToolCall.objects.bulk_create(calls, batch_size=2000)
    Approval.objects.bulk_create([
        Approval(run_id=c.run_id, tool_call=c, tool=c.tool, proposed_args=c.args,
                 state_seq=1, status="pending" if i < PENDING else "approved",
                 expires_at=now + dt.timedelta(minutes=i % 1440) if i % 3 else None,
                 decided_at=None if i < PENDING else now)
        for i, c in enumerate(calls)], batch_size=2000)


def _explained(sql: str) -> tuple[float, list[str]]:
    """Return the median execution ms of 5 EXPLAIN ANALYZEs of ``sql`` and its scans."""
    from django.db import connection

    runs, scans = [], []
    with connection.cursor() as cursor:
        for _ in range(5):
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = [row[0] for row in cursor.fetchall()]
            runs.append(float(plan[-1].split(":")[1].split("ms")[0]))
            scans = sorted({" ".join(x for x in m.groups() if x)
                            for line in plan if (m := _SCAN.search(line))})
    return statistics.median(runs), scans


def _measure(fn: Any) -> dict[str, Any]:
    """Return the SQL-side and Python-side time of one selector call."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as seen:
        fn()
    plans = [_explained(q["sql"]) for q in seen.captured_queries]
    times = []
    for _ in range(20):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return {"queries": len(plans), "exec_ms": round(sum(ms for ms, _ in plans), 3),
            "call_ms_p50": round(statistics.median(times), 3),
            "scans": [s for _, scans in plans for s in scans]}


def _selectors() -> dict[str, Any]:
    from approvals.selectors import approval_list_decided, approval_list_pending
    from runs.models import Team
    from runs.selectors_lists import run_agent_names

    small = frozenset({Team.objects.get(slug=SMALL_TEAM).pk})
    out = {}
    for who, teams in (("admin", None), ("team", small)):
        out[f"agent_names_{who}"] = _measure(lambda t=teams: run_agent_names(teams=t))
        out[f"inbox_pending_{who}"] = _measure(lambda t=teams: approval_list_pending(teams=t))
        out[f"inbox_decided_{who}"] = _measure(lambda t=teams: approval_list_decided(teams=t))
    names = run_agent_names(teams=None)
    if "retired-bot" not in names or len(names) != AGENTS + 1:
        raise SystemExit(f"the agent filter lists {names}, not the {AGENTS + 1} seeded agents")
    return out


def main() -> None:
    """Seed (once) and measure; print one JSON line."""
    os.environ["BENCH_DATABASE_URL"] = os.environ.get(
        "BENCH_ENGINE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentops_bench_scale")
    url = django_boot()
    _seed()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs_run")
        runs = cursor.fetchone()[0]
    figures = _selectors()
    emit("runs_table", {"runs": runs, "pending": PENDING, "decided": DECIDED, **figures,
                        "commit_floor_per_s": round(commit_floor(conninfo=url)),
                        "load_avg": round(os.getloadavg()[0], 2),
                        "db": url.rsplit("/", 1)[-1]})


if __name__ == "__main__":
    main()
