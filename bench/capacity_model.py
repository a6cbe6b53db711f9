"""The capacity model: hosts, sessions and primary size for N concurrent agents.

Pure arithmetic over the per-step costs ``bench/capacity.py`` measures (kept in
``bench/capacity.json``), so docs/capacity.md's tables are printed by this module and
``tests/bench/test_capacity.py`` checks the document still says what the figures give.

    python bench/capacity_model.py                     # the tables, from bench/capacity.json
    python bench/capacity_model.py --ceiling 20000     # a primary whose commit ceiling you measured
    python bench/capacity_model.py --runs-in-flight 500 --latency 2
    python bench/capacity_model.py --doc docs/capacity.md   # after a new bench/capacity.json

A *step* is one model call and the tool call it asks for (bench.model_server's agent: 20
tool steps and a closing reply a run). N agents, each waiting L seconds on its model, make
N / L steps a second when the engine keeps up: every rate below is that times a cost per step.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root holds agentops
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agentops.host_sessions import KEEPER, WORKER_HOST_FIXED

COSTS = Path(__file__).resolve().with_name("capacity.json")
AGENTS = (1_000, 10_000, 100_000)
LATENCY_S = 5.0
PRIMARY_SIZES = (2, 4, 8, 16, 32, 64, 96, 128)  # vCPU of the instance sizes clouds sell


@dataclass(frozen=True)
class Host:
    """A worker host: ``agentops worker`` with ``workers`` q2 processes of ``runs_in_flight``
    slots each, on ``cores`` vCPU and ``ram_gb`` of memory, loaded to at most the caps."""

    cores: int = 8
    ram_gb: float = 16.0
    workers: int = 8  # AGENTOPS_WORKERS: one per core (one interpreter lock each)
    runs_in_flight: int = 250  # AGENTOPS_RUNS_IN_FLIGHT (the default, the measured packing)
    db_pool_max: int = 8  # AGENTOPS_DB_POOL_MAX (the default)
    cpu_cap: float = 0.7
    ram_cap: float = 0.8


@dataclass(frozen=True)
class Primary:
    """What one PostgreSQL primary is allowed to carry (``headroom`` of what it can do)."""

    commit_ceiling: float | None = None  # write commits/s; None: the measured one
    wal_mb_s: float | None = None  # sustained WAL MB/s; None: the measured one
    max_cores: int = 64  # the largest primary worth running before splitting
    headroom: float = 0.5  # vacuum, checkpoints, console reads, backups, bursts
    cpu_cap: float = 0.6
    hop_ms: float = 0.2  # pooler <-> server per transaction, on top of the server's time


def per_step(costs: dict[str, Any]) -> dict[str, float]:
    """Return the costs of one step, a run's start spread over its steps."""
    steps = costs["steps_per_run"]
    start = costs["run_start"]
    return {
        "write_commits": costs["write_commits_per_step"] + start["write_commits"] / steps,
        "commits": costs["commits_per_step"] + start["commits"] / steps,
        "wal_bytes": costs["wal_bytes_per_step"] + start["wal_bytes"] / steps,
        "db_bytes": costs["db_growth_bytes_per_step"] + start["db_growth_bytes"] / steps,
        "server_cpu_ms": costs["server_cpu_ms_per_step"],
        "server_active_ms": costs["server_active_ms_per_step"],
        "worker_cpu_ms": costs["worker_cpu_ms_per_step"],
    }


def runs_per_host(costs: dict[str, Any], host: Host, latency_s: float) -> tuple[int, str]:
    """Return how many runs one host keeps in flight, and which limit binds first."""
    cpu_s = costs["worker_cpu_ms_per_step"] / 1000
    idle_mb = costs["rss_idle_mb"] * host.workers / costs["host_workers"]
    bounds = {
        "slots": host.workers * host.runs_in_flight,
        "CPU": min(host.cores, host.workers) * host.cpu_cap * latency_s / cpu_s,
        "RAM": (host.ram_gb * 1024 * host.ram_cap - idle_mb) / costs["mb_per_in_flight_run"],
    }
    bound = min(bounds, key=bounds.get)
    return int(bounds[bound]), bound


def ceilings(costs: dict[str, Any], primary: Primary) -> dict[str, float]:
    """Return the primary's commit ceiling and WAL rate: given, or measured on this machine."""
    return {"commits": primary.commit_ceiling or costs["machine"]["commit_ceiling_per_s"],
            "wal_mb_s": primary.wal_mb_s or costs["machine"]["wal_mb_per_s"]}


def row(costs: dict[str, Any], agents: int, latency_s: float = LATENCY_S,
        host: Host = Host(), primary: Primary = Primary()) -> dict[str, Any]:
    """Return the model's figures for ``agents`` concurrent agents at model latency L."""
    step = per_step(costs)
    steps_s = agents / latency_s
    per_host, bound = runs_per_host(costs, host, latency_s)
    hosts = math.ceil(agents / per_host)
    commits_s = steps_s * step["commits"]
    busy = _pooled_busy(costs, step, steps_s, primary)
    cores = steps_s * step["server_cpu_ms"] / 1000 / primary.cpu_cap
    limit = ceilings(costs, primary)
    write_s = steps_s * step["write_commits"]
    wal_mb_s = steps_s * step["wal_bytes"] / 1e6
    return {
        "agents": agents, "steps_s": steps_s, "write_commits_s": write_s,
        "commits_s": commits_s, "wal_mb_s": wal_mb_s,
        "db_gb_day": steps_s * step["db_bytes"] * 86400 / 1e9,
        "primary_cores": cores, "primary_size": _size(cores),
        "commit_share": write_s / (limit["commits"] * primary.headroom),
        "wal_share": wal_mb_s / (limit["wal_mb_s"] * primary.headroom),
        "hosts": hosts, "runs_per_host": per_host, "host_bound": bound,
        "host_cpu_share": (agents / hosts / latency_s * costs["worker_cpu_ms_per_step"] / 1000
                           / host.cores),
        "sessions_direct": hosts * (host.workers * host.db_pool_max + KEEPER + WORKER_HOST_FIXED),
        "pooler_servers": max(10, math.ceil(2 * busy)),
        "owner_sessions": hosts * host.workers,
    }


def _pooled_busy(costs: dict[str, Any], step: dict[str, float], steps_s: float,
                 primary: Primary) -> float:
    """Return the server connections busy at once through a transaction-mode pooler (Little's
    law: transactions/s x how long each holds its connection): the server's CPU for them, a
    WAL flush (1 / the one-session commit floor) for each write, and a hop each way."""
    flush_ms = 1000 / costs["machine"]["commit_floor_per_s"]
    held_ms = (step["server_cpu_ms"] + step["write_commits"] * flush_ms
               + step["commits"] * primary.hop_ms)
    return steps_s * held_ms / 1000


def primary_limits(costs: dict[str, Any], latency_s: float = LATENCY_S,
                   primary: Primary = Primary()) -> dict[str, int]:
    """Return the concurrent agents one primary carries by each of its limits."""
    step = per_step(costs)
    limit = ceilings(costs, primary)
    steps_max = {
        "write commits": limit["commits"] * primary.headroom / step["write_commits"],
        "WAL rate": limit["wal_mb_s"] * 1e6 * primary.headroom / step["wal_bytes"],
        "CPU": primary.max_cores * primary.cpu_cap * 1000 / step["server_cpu_ms"],
    }
    return {name: int(steps * latency_s) for name, steps in steps_max.items()}


def one_primary_limit(costs: dict[str, Any], latency_s: float = LATENCY_S,
                      primary: Primary = Primary()) -> tuple[int, str]:
    """Return the most concurrent agents one primary carries, and what stops it first."""
    limits = primary_limits(costs, latency_s, primary)
    first = min(limits, key=limits.get)
    return limits[first], first


def _size(cores: float) -> str:
    """Return the smallest instance size that holds ``cores``, or say none does."""
    fits = [s for s in PRIMARY_SIZES if s >= cores]
    return str(fits[0]) if fits else f"> {PRIMARY_SIZES[-1]}: split"


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def table(costs: dict[str, Any], latency_s: float = LATENCY_S, host: Host = Host(),
          primary: Primary = Primary()) -> str:
    """Return the capacity table (markdown) for AGENTS at ``latency_s``."""
    rows = [row(costs, n, latency_s, host, primary) for n in AGENTS]
    lines = ["| concurrent agents, L = %g s | " % latency_s
             + " | ".join(f"{r['agents']:,}" for r in rows) + " |",
             "|---|" + "---:|" * len(rows)]
    for label, cell in _CELLS:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in rows) + " |")
    return "\n".join(lines)


_CELLS = (
    ("model steps/s (N / L)", lambda r: _fmt(r["steps_s"])),
    ("write commits/s (WAL flushes)", lambda r: _fmt(r["write_commits_s"])),
    ("transactions/s (`xact_commit`, reads included)", lambda r: _fmt(r["commits_s"])),
    ("share of the primary's commit budget", lambda r: f"{r['commit_share']:.0%}"),
    ("WAL, MB/s", lambda r: _fmt(r["wal_mb_s"])),
    ("share of the primary's WAL budget", lambda r: f"{r['wal_share']:.0%}"),
    ("database growth before retention, GB/day", lambda r: _fmt(r["db_gb_day"])),
    ("primary vCPU needed (busy cores / 0.6)", lambda r: _fmt(r["primary_cores"])),
    ("primary size, vCPU", lambda r: r["primary_size"]),
    ("worker hosts (8 vCPU, 16 GB), + 1 spare", lambda r: f"{r['hosts']} + 1"),
    ("runs per host (limit)", lambda r: f"{r['runs_per_host']:,} ({r['host_bound']})"),
    ("worker host CPU busy", lambda r: f"{r['host_cpu_share']:.0%}"),
    ("PostgreSQL sessions, no pooler (maximum)", lambda r: f"{r['sessions_direct']:,}"),
    ("through PgBouncer: server connections", lambda r: str(r["pooler_servers"])),
    ("through PgBouncer: + owner sessions, direct", lambda r: f"{r['owner_sessions']:,}"),
)


def limit_line(costs: dict[str, Any], latency_s: float = LATENCY_S,
               primary: Primary = Primary()) -> str:
    """Return the sentence saying where one primary stops being enough."""
    agents, first = one_primary_limit(costs, latency_s, primary)
    source = "the given" if primary.commit_ceiling or primary.wal_mb_s else "this machine's"
    return (f"A primary with {source} commit ceiling and WAL rate carries about {agents:,} "
            f"concurrent agents at L = {latency_s:g} s; {first} run out first.")


def limit_table(costs: dict[str, Any], latency_s: float = LATENCY_S,
                commits_per_s: tuple[int, ...] = (5_000, 10_000, 20_000, 50_000),
                wal_mb_per_s: tuple[int, ...] = (200, 500, 1000)) -> str:
    """Return the agents one primary carries by each limit: at this machine's figures, and
    at the commit ceilings and WAL rates a bigger server may measure."""
    here = ceilings(costs, Primary())
    lines = [f"| a primary that sustains | concurrent agents at L = {latency_s:g} s |",
             "|---|---:|"]
    for ceiling in (here["commits"], *commits_per_s):
        agents = primary_limits(costs, latency_s, Primary(commit_ceiling=ceiling))
        note = " (this machine, 8 sessions)" if ceiling == here["commits"] else ""
        lines.append(f"| {ceiling:,.0f} write commits/s{note} | {agents['write commits']:,} |")
    for rate in (here["wal_mb_s"], *wal_mb_per_s):
        agents = primary_limits(costs, latency_s, Primary(wal_mb_s=rate))
        note = " (this machine, one session)" if rate == here["wal_mb_s"] else ""
        lines.append(f"| {rate:,.0f} MB/s of WAL{note} | {agents['WAL rate']:,} |")
    cpu = primary_limits(costs, latency_s)["CPU"]
    lines.append(f"| {Primary().max_cores} vCPU at {Primary().cpu_cap:.0%} | {cpu:,} |")
    return "\n".join(lines)


def costs_table(costs: dict[str, Any]) -> str:
    """Return the measured costs (markdown), the machine's figures beside them."""
    m = costs["machine"]
    rows = [
        ("write commits (WAL flushes, from the WAL)", costs["write_commits_per_step"],
         costs["run_start"]["write_commits"], "no"),
        ("transactions (`xact_commit`, reads included)", costs["commits_per_step"],
         costs["run_start"]["commits"], "no"),
        ("WAL bytes of the database", costs["wal_bytes_per_step"],
         costs["run_start"]["wal_bytes"], "no"),
        ("database growth, bytes", costs["db_growth_bytes_per_step"],
         costs["run_start"]["db_growth_bytes"], "no"),
        ("PostgreSQL CPU ms (its backends, /proc)", costs["server_cpu_ms_per_step"], "", "yes"),
        ("PostgreSQL `active_time` ms (waits included)", costs["server_active_ms_per_step"], "",
         "very"),
        ("worker host CPU ms", costs["worker_cpu_ms_per_step"], "", "yes"),
    ]
    lines = ["| per model step | a step | a run's start | load-sensitive |", "|---|---:|---:|---|"]
    lines += [f"| {label} | {_fmt(a)} | {_fmt(b) if b != '' else '—'} | {c} |"
              for label, a, b, c in rows]
    lines += [
        "", "| the host and the machine, same window | |", "|---|---:|",
        f"| runs in flight (one host, {costs['host_workers']} q2 processes) "
        f"| {costs['peak_in_flight']:,} |",
        f"| steps/s, middle half (N / L = {costs['n_over_l']:g}) | {costs['steps_per_s_mid']} |",
        f"| host PostgreSQL sessions, peak | {costs['host_sessions_peak']} |",
        f"| host RSS idle, MB / per run in flight, MB | {costs['rss_idle_mb']:,.0f} / "
        f"{costs['mb_per_in_flight_run']} |",
        f"| commit floor, one session, commits/s (before / after) | "
        f"{m['before']['commit_floor_per_s']:,} / {m['after']['commit_floor_per_s']:,} |",
        f"| commit ceiling, {m['before']['ceiling_sessions']} sessions, commits/s "
        f"(before / after) | {m['before']['commit_ceiling_per_s']:,} / "
        f"{m['after']['commit_ceiling_per_s']:,} |",
        f"| WAL write rate, one session, MB/s (before / after) | "
        f"{m['before']['wal_mb_per_s']} / {m['after']['wal_mb_per_s']} |",
        f"| load average, 1-minute mean (before / after) | {m['before']['load_avg']} / "
        f"{m['after']['load_avg']} |",
    ]
    return "\n".join(lines)


def blocks(costs: dict[str, Any]) -> dict[str, str]:
    """Return the document's generated blocks, by marker name."""
    return {"costs": costs_table(costs), "table": table(costs),
            "limit": limit_line(costs) + "\n\n" + limit_table(costs)}


def doc_refresh(text: str, costs: dict[str, Any]) -> str:
    """Return ``text`` with each ``<!-- capacity:NAME -->`` ... ``<!-- /capacity:NAME -->``
    block replaced by what the model prints from ``costs``."""
    for name, body in blocks(costs).items():
        start, end = f"<!-- capacity:{name} -->", f"<!-- /capacity:{name} -->"
        if start not in text or end not in text:
            raise ValueError(f"the document has no {start} ... {end} block")
        head, rest = text.split(start, 1)
        text = f"{head}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


def costs_load(path: Path = COSTS) -> dict[str, Any]:
    """Return the measured per-step costs (bench/capacity.py's JSON line)."""
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", type=Path, default=COSTS, help="a capacity.py JSON line")
    parser.add_argument("--latency", type=float, default=LATENCY_S, help="model latency, s")
    parser.add_argument("--ceiling", type=float, help="the primary's write commits/s")
    parser.add_argument("--wal-mb-s", type=float, help="the primary's sustained WAL MB/s")
    parser.add_argument("--runs-in-flight", type=int, help="AGENTOPS_RUNS_IN_FLIGHT per process")
    parser.add_argument("--doc", type=Path, help="rewrite this document's capacity blocks")
    args = parser.parse_args(argv)
    costs = costs_load(args.costs)
    if args.doc:
        args.doc.write_text(doc_refresh(args.doc.read_text(), costs))
        return 0
    print(costs_table(costs))
    print()
    host = Host() if args.runs_in_flight is None else replace(
        Host(), runs_in_flight=args.runs_in_flight)
    primary = Primary(commit_ceiling=args.ceiling, wal_mb_s=args.wal_mb_s)
    print(table(costs, args.latency, host, primary))
    print()
    print(limit_line(costs, args.latency, primary))
    print()
    print(limit_table(costs, args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
