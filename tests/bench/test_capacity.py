"""bench/capacity and bench/capacity_model: the model's arithmetic, the documents saying what
the recorded figures give, and a tiny real run of the measuring script."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from agentops.db_budget import worker_host_sessions_max
from bench._common import maintenance_url
from bench.capacity_model import (AGENTS, Host, Primary, costs_load, doc_refresh,
                                  one_primary_limit, row)

ROOT = Path(__file__).resolve().parents[2]


def test_the_capacity_doc_shows_what_the_model_computes_from_the_recorded_costs():
    doc = (ROOT / "docs" / "capacity.md").read_text()
    assert doc_refresh(doc, costs_load()) == doc, (
        "docs/capacity.md says other figures than bench/capacity.json gives: run "
        "python bench/capacity_model.py --doc docs/capacity.md")


def test_a_document_without_the_blocks_is_refused():
    with pytest.raises(ValueError, match="capacity:costs"):
        doc_refresh("no blocks here", costs_load())


def test_results_md_keeps_the_recorded_costs_with_the_commit_floor_beside_them():
    text = (ROOT / "bench" / "results.md").read_text()
    section = text[text.index("## capacity"):]
    lines = [json.loads(ln) for ln in section.splitlines() if ln.startswith('{"bench": "capacity"')]
    assert costs_load() in lines
    prose = section.split("<details>")[0]
    for when in ("before", "after"):
        assert f"{costs_load()['machine'][when]['commit_floor_per_s']:,}" in prose


def _costs(**over) -> dict:
    costs = {"steps_per_run": 10, "commits_per_step": 2.0, "write_commits_per_step": 1.0,
             "wal_bytes_per_step": 4000, "db_growth_bytes_per_step": 2000,
             "server_cpu_ms_per_step": 0.5, "server_active_ms_per_step": 0.6,
             "worker_cpu_ms_per_step": 5.0,
             "rss_idle_mb": 500.0, "host_workers": 2, "mb_per_in_flight_run": 0.5,
             "run_start": {"commits": 10, "write_commits": 2, "wal_bytes": 10000,
                           "db_growth_bytes": 0},
             "machine": {"commit_floor_per_s": 2000, "commit_ceiling_per_s": 10000,
                         "wal_mb_per_s": 100.0}}
    return {**costs, **over}


def test_rates_are_agents_over_latency_times_the_cost_of_a_step_and_a_runs_start():
    got = row(_costs(), 1000, latency_s=5.0)
    assert got["steps_s"] == 200
    assert got["write_commits_s"] == pytest.approx(200 * (1.0 + 2 / 10))
    assert got["commits_s"] == pytest.approx(200 * (2.0 + 10 / 10))
    assert got["wal_mb_s"] == pytest.approx(200 * (4000 + 1000) / 1e6)
    assert got["commit_share"] == pytest.approx(240 / 5000)
    assert got["primary_cores"] == pytest.approx(200 * 0.5 / 1000 / 0.6)


def test_pooled_server_connections_are_transactions_a_second_times_their_hold_twice_over():
    # A step holds a connection 0.5 ms of CPU + 1.2 flushes of 0.5 ms + 3 hops of 0.2 ms.
    assert row(_costs(), 100_000)["pooler_servers"] in (68, 69)  # 2 x 20,000/s x 1.7 ms
    assert row(_costs(), 1_000)["pooler_servers"] == 10  # never fewer than 10


def test_a_host_is_bounded_by_slots_cpu_or_memory_whichever_comes_first():
    assert row(_costs(), 10_000)["host_bound"] == "slots"  # 8 x 250 = 2,000 runs
    assert row(_costs(), 10_000)["hosts"] == 5
    heavy = row(_costs(worker_cpu_ms_per_step=50.0), 10_000)  # 8 x 0.7 x 5 s / 50 ms = 560
    assert (heavy["host_bound"], heavy["runs_per_host"], heavy["hosts"]) == ("CPU", 560, 18)
    fat = row(_costs(mb_per_in_flight_run=20.0), 10_000, host=Host(ram_gb=8))
    assert fat["host_bound"] == "RAM"
    assert fat["sessions_direct"] == fat["hosts"] * (8 * 8 + 1 + 7)


def test_one_primary_stops_at_its_first_limit_and_a_measured_ceiling_moves_it():
    agents, first = one_primary_limit(_costs())
    assert first == "write commits" and agents == int(10000 * 0.5 / 1.2 * 5)
    more, first = one_primary_limit(_costs(), primary=Primary(commit_ceiling=1e6))
    assert first == "WAL rate" and more > agents
    assert [r["agents"] for r in (row(_costs(), n) for n in AGENTS)] == list(AGENTS)


def _url() -> str:
    db = connection.settings_dict
    return (f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
            f"{db.get('PORT') or 5432}/{db['NAME']}_capacity")


def _drop(url: str) -> None:
    admin, name = maintenance_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                     .format(sql.Identifier(name)))


@pytest.mark.postgres
@pytest.mark.slow
def test_the_script_measures_a_real_worker_host_and_the_model_reads_its_line(tmp_path):
    env = {**os.environ, "BENCH_RUNS": "6", "BENCH_DELAY_S": "0.2", "BENCH_STEPS": "2",
           "BENCH_CEILING_SESSIONS": "2", "BENCH_CEILING_S": "0.3", "BENCH_WAL_COMMITS": "2",
           "BENCH_CAPACITY_DATABASE_URL": _url()}
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "capacity.py")], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=240, check=False)
    finally:
        _drop(_url())
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = json.loads(proc.stdout.splitlines()[-1])
    assert line["bench"] == "capacity" and line["steps"] == 6 * 3
    assert line["ended"] == {"succeeded": 6}
    assert line["write_commits_per_step"] >= 1 and line["wal_bytes_per_step"] > 1000
    assert line["commits_per_step"] >= line["write_commits_per_step"]
    assert line["server_cpu_ms_per_step"] > 0 and line["worker_cpu_ms_per_step"] > 0
    assert line["run_start"]["write_commits"] >= 1 and line["host_sessions_peak"] >= 2
    assert line["machine"]["commit_floor_per_s"] > 0 and line["machine"]["wal_mb_per_s"] > 0
    (tmp_path / "costs.json").write_text(json.dumps(line))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "capacity_model.py"), "--costs",
                          str(tmp_path / "costs.json")], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert re.search(r"^\| worker hosts .* \| \d+ \+ 1 \|", out, re.M)
    assert "concurrent agents at L = 5 s; " in out


def test_the_models_direct_sessions_are_what_the_doctor_counts_for_such_a_host(settings):
    """The model's sessions per host come from the production count (agentops.db_budget)."""
    host = Host(workers=3, db_pool_max=5)
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": host.workers}
    settings.AGENTOPS_DB_POOL_MAX = host.db_pool_max
    got = row(_costs(), 10_000, host=host)
    assert got["sessions_direct"] == got["hosts"] * worker_host_sessions_max()
