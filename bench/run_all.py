"""Run every benchmark as a subprocess and write bench/results.md (figures vs targets).

Each script prints one JSON line of figures on stdout. Scripts that do not exist yet are
skipped and listed as such, so the slots for the engine benchmarks can be filled in later.

    .venv/bin/python bench/run_all.py                     # all (make bench)
    .venv/bin/python bench/run_all.py replay console_latency
    BENCH_SCALE=0.01 .venv/bin/python bench/run_all.py    # a quick pass on a small seed
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import operator
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, bench_scale, bench_url, pg_version_text

BENCH_DIR = ROOT / "bench"
RESULTS = BENCH_DIR / "results.md"
OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclass(frozen=True)
class Target:
    """A figure (dotted path into the JSON line) compared with a bound."""

    figure: str
    op: str
    bound: float
    note: str = ""


@dataclass(frozen=True)
class Bench:
    """One benchmark script and the targets its figures must meet."""

    name: str
    script: str
    targets: list[Target] = field(default_factory=list)


_PAGE_TARGETS = [Target(f"pages.{page}.p95_ms", "<=", 150, f"{label}, p95 ms")
                 for page, label in (("queue", "attention queue"),
                                     ("queue_filtered", "filtered queue"),
                                     ("run_10k", "run page, 10k events"),
                                     ("inbox", "approvals inbox"))]

BENCHMARKS = [
    Bench("seed", "seed.py", [Target("seconds", "<=", 120, "seeding time, s (0 = seed found)")]),
    Bench("console_latency", "console_latency.py", _PAGE_TARGETS),
    Bench("replay", "replay.py", [
        Target("fold_events_per_s", ">=", 50_000, "reduce over a 10k-event run, events/s"),
        Target("replay_events_per_s", ">=", 50_000, "load from PostgreSQL + reduce, events/s")]),
    # engine_throughput runs a round of bench/peers.py (DBOS, LangGraph) in each of its rounds.
    Bench("engine_throughput", "engine_throughput.py", [
        Target("ratio_vs_dbos", ">=", 2.0,
               "durable steps/s vs DBOS, measured side by side in this run"),
        Target("ratio_vs_langgraph", ">=", 1.5,
               "durable steps/s vs LangGraph + PostgresSaver, side by side"),
        Target("share_of_floor", ">=", 0.4,
               "durable steps/s / raw commits/s (the floor) measured in the same run"),
        Target("ratio_vs_dbos_issue", ">=", 1.0,
               "durable steps/s vs the issue's DBOS figure (582/s): the floor"),
        Target("scaling_2_vs_1", ">=", 1.6, "2 workers vs 1 worker")]),
    Bench("unit_cost", "unit_cost.py", []),
    Bench("history_growth", "history_growth.py", [
        Target("latency_ratio", "<=", 1.2, "ms per step at step 200 / step 10"),
        Target("amortised_bytes_ratio", "<=", 1.2, "WAL bytes per step, last 50 / first 50")]),
    Bench("recovery_latency", "recovery_latency.py", [
        Target("p99_s", "<=", 3.0, "kill or pause -> next committed unit on another worker, p99 s")]),
    # 500 runs whose model takes 1 s a call, one worker host with default settings.
    Bench("density", "density.py", [
        Target("peak_in_flight", ">=", 500, "runs in flight on one host, 500 runs, L = 1 s"),
        Target("mid_vs_ideal", ">=", 0.9, "steps/s vs ideal N / L = 500/s"),
        Target("mb_per_in_flight_run", "<=", 1.0, "memory per in-flight run, MB")]),
    # 20 worker processes x 250 runs in flight through PgBouncer (transaction mode, <= 40).
    Bench("pgbouncer", "pgbouncer.py", [
        Target("peak_server_connections", "<=", 40, "server connections through PgBouncer"),
        Target("not_succeeded", "<=", 0, "runs of 20 x 250 through PgBouncer not succeeded")]),
    # What one model step costs PostgreSQL and a worker host (L = 5 s): docs/capacity.md.
    Bench("capacity", "capacity.py", []),
    # q2's own cost per task: 1000 no-op tasks enqueued as ticks are, one worker host.
    Bench("dispatch", "dispatch.py", []),
    # Seeds 1M and 10M events into two databases of their own (~10 min the first time).
    Bench("partitions", "partitions.py", [
        Target("worst_ratio", "<=", 1.2,
               "console p95 and replay at 10M events / at 1M, partitioned events")]),
    # A no-op step: this tree with tracing off and on, and the code before tracing, in lockstep.
    Bench("trace_overhead", "trace_overhead.py", [
        Target("hooks_off.share_of_off_step", "<", 0.05,
               "tracing's hooks with tracing off, share of a no-op step's CPU"),
        Target("off_vs_baseline", "<", 1.05,
               "no-op step, tracing off / before tracing (CPU per step, median round)"),
        Target("on_vs_off", "<", 1.15,
               "no-op step, tracing on (OTLP export) / off (CPU per step, median round)")]),
]


def _run(bench: Bench, timeout_s: float) -> dict[str, Any]:
    """Run one script; return its figures or why there are none."""
    path = BENCH_DIR / bench.script
    if not path.exists():
        return {"_status": "skipped", "_why": f"bench/{bench.script} does not exist yet"}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=None, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"_status": "timeout", "_why": f"no result within {timeout_s:.0f} s"}
    wall = round(time.perf_counter() - start, 1)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        return {"_status": "crashed", "_why": f"exit code {proc.returncode}", "_wall_s": wall}
    try:
        figures = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"_status": "crashed", "_why": "last stdout line is not JSON", "_wall_s": wall}
    return {"_status": "ok", "_wall_s": wall, **figures}


def _lookup(figures: dict[str, Any], dotted: str) -> Any:
    value: Any = figures
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _verdict(figures: dict[str, Any], target: Target) -> tuple[str, str]:
    """Return (value shown, PASS/FAIL/why not measured) for one target."""
    if figures.get("_status") != "ok":
        return "—", figures.get("_status", "?")
    value = _lookup(figures, target.figure)
    if not isinstance(value, int | float):
        parent = _lookup(figures, target.figure.rsplit(".", 1)[0]) if "." in target.figure else None
        why = "figure missing"
        if isinstance(parent, dict) and parent.get("status"):
            why = f"{parent['status']}: {parent.get('error', '')[:80]}".rstrip(": ")
        return "—", f"not measured ({why})"
    return f"{value:,}", "PASS" if OPS[target.op](value, target.bound) else "FAIL"


def _machine() -> list[str]:
    url = urlsplit(bench_url())
    return [
        f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: nproc {os.cpu_count()}, {platform.machine()}, "
        f"Python {platform.python_version()}, PostgreSQL {pg_version_text()}",
        f"- Database: {url.hostname}:{url.port or 5432}{url.path}, "
        f"BENCH_SCALE={bench_scale()}",
    ]


def _raw_queries_table(figures: dict[str, Any]) -> list[str]:
    rows = figures.get("raw_queries") or {}
    if not rows:
        return []
    out = ["", "Expected console queries (EXPLAIN ANALYZE, median of 5):", "",
           "| Query | Exec ms | Index scan | Indexes | Seq scans on big tables | Rows sorted |",
           "|---|---:|---|---|---|---:|"]
    for name, q in rows.items():
        out.append(f"| {name} | {q['exec_ms']} | {'yes' if q['uses_index'] else 'NO'} | "
                   f"{', '.join(q['indexes']) or '—'} | "
                   f"{', '.join(q['seq_scans_big_tables']) or '—'} | {q['rows_sorted']} |")
    return out


def render(results: dict[str, dict[str, Any]]) -> str:
    """Return results.md for ``results`` (benchmark name -> figures)."""
    lines = ["# Benchmark results", "", *_machine(), "",
             "| Benchmark | Figure | Value | Target | Result |", "|---|---|---:|---|---|"]
    for bench in BENCHMARKS:
        figures = results.get(bench.name)
        if figures is None:
            continue
        if figures["_status"] != "ok" or not bench.targets:
            why = figures.get("_why", "no target set")
            lines.append(f"| {bench.name} | — | — | — | {figures['_status']}: {why} |")
        for target in bench.targets if figures["_status"] == "ok" else []:
            value, verdict = _verdict(figures, target)
            label = target.note or target.figure
            lines.append(f"| {bench.name} | {label} (`{target.figure}`) | {value} | "
                         f"{target.op} {target.bound:,} | {verdict} |")
    for name, figures in results.items():
        if figures["_status"] == "ok":
            lines += ["", f"## {name}", *_raw_queries_table(figures), "",
                      "<details><summary>JSON line</summary>", "", "```json",
                      json.dumps({k: v for k, v in figures.items() if not k.startswith("_")},
                                 indent=1), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks (all by default), write results.md, return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per script")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = parser.parse_args(argv)
    known = {b.name for b in BENCHMARKS}
    unknown = set(args.names) - known
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {sorted(known)}")
    chosen = [b for b in BENCHMARKS if not args.names or b.name in args.names]
    results: dict[str, dict[str, Any]] = {}
    for bench in chosen:
        print(f"== {bench.name}", file=sys.stderr, flush=True)
        results[bench.name] = _run(bench, args.timeout)
        status = results[bench.name]["_status"]
        print(f"== {bench.name}: {status} {results[bench.name].get('_why', '')}",
              file=sys.stderr, flush=True)
    text = render(results)
    RESULTS.write_text(text)
    print(text)
    crashed = any(r["_status"] in ("crashed", "timeout") for r in results.values())
    failed = "| FAIL |" in text
    return 1 if crashed or (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
