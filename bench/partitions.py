"""Partitioned history at 1 M and 10 M events: console p95 and replay, and their ratio.

Two bench databases of the same server, seeded by ``bench/seed.py`` into the partitioned
event table (runs.partitions), with the same runs (BENCH_SCALE 0.5: 50k runs, the same
10k-event run, the same approvals) and 1 M or 10 M events (BENCH_EVENTS_SCALE 0.5 or 5:
~20 or ~200 events a run): ``<BENCH_DATABASE_URL>_part0.5x0.5`` and ``..._part0.5x5``. So
the ratio is the event table's growth alone; the runs table's own growth is another matter
(more runs make the queue's and the run page's runs queries slower, partitioned events or
not). ``console_latency.py`` and ``replay.py`` run against each in turn, ``BENCH_ROUNDS`` (3)
rounds alternating the sizes, so a change of load on the machine hits both; per size the
median round's figures (and each figure's best round, the least disturbed) are kept. The
commit floor and the load average are printed beside.

    flock /tmp/agentops-bench.lock .venv/bin/python bench/partitions.py

``BENCH_PARTITIONS_SCALES`` ("0.5,5") sets the two events scales and
``BENCH_PARTITIONS_RUNS_SCALE`` (0.5) the runs scale (labels stay 1M and 10M: "0.01,0.1"
and 0.01 to try it out). ``BENCH_PARTITIONS_DROP=1`` drops both databases afterwards (the
10 M one is ~4 GB).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (ROOT, bench_url, commit_floor, db_url_suffixed, emit, log,
                           maintenance_url)

def _sizes() -> tuple[tuple[str, float, float, str], ...]:
    """(label, BENCH_SCALE, BENCH_EVENTS_SCALE, database suffix) of the small and big size."""
    runs = float(os.environ.get("BENCH_PARTITIONS_RUNS_SCALE", "0.5"))
    small, big = (float(x) for x in os.environ.get("BENCH_PARTITIONS_SCALES", "0.5,5").split(","))
    return (("1M", runs, small, f"_part{runs:g}x{small:g}"),
            ("10M", runs, big, f"_part{runs:g}x{big:g}"))


SIZES = _sizes()
PAGES = ("queue", "queue_filtered", "run_10k", "inbox")
TARGET_RATIO = 1.2


def _script(name: str, scale: float, events_scale: float, url: str) -> dict:
    env = {**os.environ, "BENCH_SCALE": str(scale), "BENCH_EVENTS_SCALE": str(events_scale),
           "BENCH_DATABASE_URL": url}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / name)], env=env, check=True,
                          stdout=subprocess.PIPE, text=True, timeout=3600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _round(scale: float, events_scale: float, url: str) -> dict[str, float]:
    replay = _script("replay.py", scale, events_scale, url)
    console = _script("console_latency.py", scale, events_scale, url)
    figures = {f"{page}_p95_ms": console["pages"][page]["p95_ms"] for page in PAGES
               if console["pages"].get(page, {}).get("status") == "ok"}
    return {"events": console["events"], "replay_p50_ms": replay["replay_ms"]["p50"],
            "load_p50_ms": replay["load_ms"]["p50"], **figures}


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}


def _best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's best round: the least disturbed by other load on a shared machine."""
    return {k: round(min(r[k] for r in rounds), 3) for k in rounds[0]}


def _ratios(small: dict[str, float], big: dict[str, float]) -> dict[str, float]:
    return {k: round(big[k] / small[k], 3) for k in small if k != "events" and small[k]}


def _partition_count(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM pg_inherits "
                            "WHERE inhparent = 'runs_event'::regclass").fetchone()[0]


def _drop(urls: list[str]) -> None:
    import psycopg
    from psycopg import sql

    for url in urls:
        admin, name = maintenance_url(url)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))


def main() -> None:
    """Measure both sizes in alternating rounds; print the ratios 10M / 1M on one JSON line."""
    rounds_n = int(os.environ.get("BENCH_ROUNDS", "3"))
    urls = {label: db_url_suffixed(bench_url(), suffix) for label, _, _, suffix in SIZES}
    load_before = os.getloadavg()
    rounds: dict[str, list] = {label: [] for label, _, _, _ in SIZES}
    for i in range(rounds_n):
        for label, scale, events_scale, _ in SIZES:
            log(f"partitions: round {i + 1}, {label} events")
            rounds[label].append(_round(scale, events_scale, urls[label]))
    floor = commit_floor(conninfo=urls["1M"])
    per_size = {label: _median(r) for label, r in rounds.items()}
    ratios = _ratios(per_size["1M"], per_size["10M"])
    best = {label: _best(r) for label, r in rounds.items()}
    figures = {"sizes": per_size, "ratios_10m_over_1m": ratios,
               "best_rounds": best, "best_ratios_10m_over_1m": _ratios(best["1M"], best["10M"]),
               "worst_ratio": max(ratios.values()), "target_ratio": TARGET_RATIO,
               "meets_target": max(ratios.values()) <= TARGET_RATIO,
               "partitions": {label: _partition_count(u) for label, u in urls.items()},
               "commit_floor_per_s": round(floor), "loadavg_before": load_before,
               "loadavg_after": os.getloadavg(), "rounds": rounds}
    if os.environ.get("BENCH_PARTITIONS_DROP") == "1":
        _drop(list(urls.values()))
    emit("partitions", figures)


if __name__ == "__main__":
    main()
