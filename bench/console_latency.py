"""Console latency: server time of the console pages on the seeded database (100k runs, 2M events).

Pages (django.test.Client, logged in as an admin): the attention queue, the queue filtered
to blocked runs of one agent and reason, the run page of the 10k-event run, the approvals
inbox; 3 warm-ups then 30 timed requests each. A URL name that does not resolve yet is
reported as "missing". For each page the queries of one request are EXPLAIN ANALYZEd, and so
are the raw queries the pages are expected to run, to show whether indexes are used.

    BENCH_SCALE=0.01 .venv/bin/python bench/console_latency.py
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import bench_scale, django_boot, emit, log, percentiles

WARMUPS = 3
REQUESTS = 30
TARGET_P95_MS = 150.0
BIG_TABLES = ("runs_run", "runs_event", "ledger_toolcall", "approvals_approval", "runs_step")
INDEX_NODES = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")


def _admin_client() -> Any:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    from approvals.roles import ADMIN

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True})
    group, _ = Group.objects.get_or_create(name=ADMIN)
    user.groups.add(group)
    client = Client()
    client.force_login(user)
    return client


def _filter_values() -> tuple[str, str]:
    """Return the (agent, reason) with the most blocked runs: the worst case for the filter."""
    from django.db.models import Count

    from runs.models import Run

    top = (Run.objects.filter(status="blocked").values("agent_name", "attention_reason")
           .annotate(n=Count("pk")).order_by("-n").first())
    return (top["agent_name"], top["attention_reason"]) if top else ("research", "stalled")


def _pages(big_run_id: str) -> list[tuple[str, str, dict, dict]]:
    agent, reason = _filter_values()
    return [
        ("queue", "console:queue", {}, {}),
        ("queue_filtered", "console:queue", {}, {"tab": "blocked", "agent": agent,
                                                  "reason": reason}),
        ("run_10k", "console:run", {"run_id": big_run_id}, {}),
        ("inbox", "console:inbox", {}, {}),
    ]


def _plan_facts(plan: dict[str, Any]) -> dict[str, Any]:
    """Summarise an EXPLAIN (FORMAT JSON) plan: index use, seq scans, rows sorted."""
    nodes, stack = [], [plan["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    seq = sorted({n["Relation Name"] for n in nodes
                  if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG_TABLES})
    indexes = sorted({n["Index Name"] for n in nodes if n["Node Type"] in INDEX_NODES})
    sorted_rows = max((n["Plans"][0].get("Actual Rows", 0) * n["Plans"][0].get("Actual Loops", 1)
                       for n in nodes if n["Node Type"] == "Sort" and n.get("Plans")), default=0)
    return {"uses_index": bool(indexes), "indexes": indexes, "seq_scans_big_tables": seq,
            "rows_sorted": sorted_rows}


def explain(sql: str, params: Any = None, *, rounds: int = 5) -> dict[str, Any]:
    """Return the median execution time of ``sql`` under EXPLAIN ANALYZE and its plan facts."""
    from django.db import connection

    times, plan = [], None
    with connection.cursor() as cur:
        for _ in range(rounds):
            cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            raw = cur.fetchone()[0]
            plan = (raw if isinstance(raw, list) else json.loads(raw))[0]
            times.append(plan["Execution Time"])
    return {"exec_ms": percentiles(times)["p50"], **_plan_facts(plan)}


def _explain_qs(qs: Any) -> dict[str, Any]:
    sql, params = qs.query.sql_with_params()
    return explain(sql, params)


def raw_queries(big_run_id: str) -> dict[str, dict[str, Any]]:
    """EXPLAIN ANALYZE the queries the console pages are expected to run."""
    from django.db.models import Count, F

    from approvals.models import Approval
    from runs.models import Event, Run
    from runs.statuses import ATTENTION

    agent, reason = _filter_values()
    attention = Run.objects.filter(status__in=[s.value for s in ATTENTION])
    queries = {
        "attention_queue": attention.order_by("updated_at")[:50],
        "attention_counts": attention.order_by().values("status").annotate(n=Count("pk")),
        "attention_by_signature": attention.exclude(attention_signature="").order_by()
        .values("attention_signature").annotate(n=Count("pk")).order_by("-n")[:100],
        "filtered_queue": Run.objects.filter(status="blocked", agent_name=agent,
                                             attention_reason=reason).order_by("updated_at")[:50],
        "event_page": Event.objects.filter(run_id=big_run_id).order_by("-seq")[:100],
        "inbox": Approval.objects.filter(status="pending").select_related("run", "tool_call")
        .order_by(F("expires_at").asc(nulls_last=True), "created_at", "id")[:100],
    }
    return {name: _explain_qs(qs) for name, qs in queries.items()}


def _page_queries(client: Any, url: str, params: dict) -> dict[str, Any]:
    """Run one request capturing its queries; EXPLAIN ANALYZE each SELECT, slowest first."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        client.get(url, params, secure=True)
    explained = []
    for q in ctx.captured_queries:
        sql = q["sql"]
        if not sql.lstrip().upper().startswith("SELECT") or "%s" in sql:
            continue
        facts = explain(sql, rounds=3)  # literals are inlined: no params, no % escaping
        explained.append({"sql": sql[:300], **facts})
    explained.sort(key=lambda e: -e["exec_ms"])
    return {"queries": len(ctx.captured_queries), "db_ms_sum": round(
        sum(e["exec_ms"] for e in explained), 3), "slowest": explained[:3],
        "seq_scans_big_tables": sorted({t for e in explained for t in e["seq_scans_big_tables"]})}


def measure_page(client: Any, name: str, kwargs: dict, params: dict) -> dict[str, Any]:
    """Return latency figures of one console page, or its status when it cannot be measured."""
    from django.urls import NoReverseMatch, reverse

    try:
        url = reverse(name, kwargs=kwargs)
    except NoReverseMatch:
        return {"status": "missing", "url_name": name}
    codes, times, size = set(), [], 0
    for i in range(WARMUPS + REQUESTS):
        start = time.perf_counter()
        response = client.get(url, params, secure=True)
        elapsed = (time.perf_counter() - start) * 1000
        codes.add(response.status_code)
        size = len(response.content)
        if i >= WARMUPS:
            times.append(elapsed)
    stats = percentiles(times)
    ok = codes == {200}
    return {"status": "ok" if ok else "http_error", "url": url, "params": params,
            "http": sorted(codes), "bytes": size, "ms": stats,
            "p95_ms": stats["p95"], "meets_target": ok and stats["p95"] <= TARGET_P95_MS,
            **_page_queries(client, url, params)}


def main() -> None:
    """Seed if needed, time the console pages and the raw queries, print one JSON line."""
    django_boot()
    from django.core.management import call_command

    # DEBUG is off here, as in production: pages need the collected, hashed static files.
    call_command("collectstatic", interactive=False, verbosity=0)
    from bench.seed import seed

    summary = seed(scale=bench_scale())
    big = summary["big_run_id"]
    client = _admin_client()
    pages: dict[str, Any] = {}
    for key, name, kwargs, params in _pages(big):
        log(f"console_latency: {key}")
        try:
            pages[key] = measure_page(client, name, kwargs, params)
        except Exception as exc:  # a page still being written must not hide the others' figures
            pages[key] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:500]}
    measured = [p["p95_ms"] for p in pages.values() if p.get("status") == "ok"]
    emit("console_latency", {
        "runs": summary["runs"], "events": summary["events"], "target_p95_ms": TARGET_P95_MS,
        "worst_p95_ms": max(measured) if measured else None,
        "all_pages_ok": len(measured) == len(pages),
        "pages": pages, "raw_queries": raw_queries(big),
    })


if __name__ == "__main__":
    main()
