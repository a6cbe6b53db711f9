"""bench/density_peers: the model server's counts, the step figures, and a tiny run of the peers.

The run (5 runs x 4 model calls at 0.05 s; DBOS, both LangGraph set-ups, tool-step
variants) needs the ``peers`` extra, which CI's venv does not hold: it is skipped there,
with the reason.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from bench.density_peers import missing_peers, replies_figures
from bench.model_server import model_server_start, stats_get, stats_reset_at

ROOT = Path(__file__).resolve().parents[2]
RUNS, DELAY_S, STEPS = 5, 0.05, 3
PEERS = ("dbos", "langgraph", "langgraph_per_run", "dbos_tool", "langgraph_tool")


def _chat(url: str, goal: str) -> dict:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": goal}],
                       "tools": [{"type": "function", "function": {"name": "noop"}}]}).encode()
    req = urllib.request.Request(f"{url}/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_model_server_counts_requests_and_replies_until_reset():
    server, url = model_server_start(0.0, 1)
    try:
        for goal in ("a", "a", "b"):
            _chat(url, goal)
        stats = stats_get(url)
        replies = stats_get(url, "replies")["replies"]
        stats_reset_at(url)
        after = stats_get(url)
    finally:
        server.kill()
        server.wait(5)
    assert stats == {"current": 0, "peak": 1, "total": 3}
    assert {g: len(ts) for g, ts in replies.items()} == {"a": 2, "b": 1}
    assert after == {"current": 0, "peak": 0, "total": 0}


def test_replies_figures_measure_gaps_above_l_per_run():
    replies = {"r1": [10.0, 11.2, 12.4], "r2": [10.1, 11.1]}
    got = replies_figures(replies, 1.0)
    assert got["model_calls"] == 5
    assert got["above_l_ms"]["n"] == 3
    assert got["above_l_ms"]["max"] == pytest.approx(200.0)
    assert got["steps_per_s"] == round(5 / 2.4, 1)


def _base_url() -> str:
    db = connection.settings_dict
    return (f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
            f"{db.get('PORT') or 5432}/{db['NAME']}_density_peers")


@pytest.mark.postgres
@pytest.mark.slow
def test_each_peer_completes_every_step_and_reports_its_figures():
    missing = missing_peers()
    if missing:
        pytest.skip(f"peers not importable ({', '.join(missing)}): "
                    "pip install -e '.[peers]' in a venv of its own to run them")
    env = {**os.environ, "BENCH_RUNS": str(RUNS), "BENCH_DELAY_S": str(DELAY_S),
           "BENCH_STEPS": str(STEPS), "BENCH_PEER_ENGINES": ",".join(PEERS),
           "BENCH_PEER_POOL": "3", "BENCH_DENSITY_PEERS_URL": _base_url()}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "density_peers.py")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = json.loads(proc.stdout.splitlines()[-1])
    assert line["bench"] == "density_peers" and line["model_calls_per_run"] == STEPS + 1
    (window,) = line["windows"]
    assert window["runs"] == RUNS and window["floor_per_s"] > 0
    assert set(window["engines"]) == set(PEERS)
    assert set(window["ratios"]) == {f"agentops_vs_{p}" for p in PEERS}
    for name, figures in window["engines"].items():
        assert figures["replies"] == figures["replies_expected"] == RUNS * (STEPS + 1), name
        assert figures["runs_ended"] == RUNS and figures["errors"] == 0, name
        assert 1 <= figures["peak_in_flight"] <= RUNS, name
        assert figures["steps_per_s_mid"] > 0 and figures["above_l_ms"]["n"] == RUNS * STEPS
        assert {"mb_per_in_flight_run", "peak_sessions", "cpu_ms_per_step",
                "rss_idle_mb", "mid_vs_ideal"} <= set(figures), name
