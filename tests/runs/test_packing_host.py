"""A real worker host packs its runs onto its first q2 process while that one has CPU to spare.

Runs whose one tool waits (``chaos_beat``: a read that heartbeats for a few seconds) cost
almost no CPU, so a packed host of two q2 processes holds them all in one; with packing off
(``AGENTOPS_PACK_CPU=0``) q2 spreads them over both. A first process with no free slot leaves
the next runs to the second; killed, it is replaced, and every run still ends.
"""
from __future__ import annotations

import os
import signal

import pytest

import tests.chaos_agents  # noqa: F401  (registers the agents in this process too)
from runs.models import Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS = 10


def _host(tmp_path, name: str, **env: str) -> Worker:
    worker = Worker(name, tmp_path, **{"AGENTOPS_RUNS_IN_FLIGHT": "40",
                                       "AGENTOPS_TOOL_TIMEOUT_S": "30", **env})
    worker.start()
    wait_until(lambda: "worker up" in worker.log_path.read_text(errors="replace"), 60,
               "the worker to start")
    return worker


def _start(n: int, seconds: float, tag: str) -> list[str]:
    return [run_start(agent="chaos_beat", goal=f"beat {tag} {i}",
                      input={"seconds": seconds}).pk for i in range(n)]


def _holders(ids: list[str]) -> dict[str, int] | None:
    """Return {run id: pid of the process holding its lease} once every run is held."""
    owners = dict(Run.objects.filter(pk__in=ids, status="running")
                  .exclude(lease_owner="").values_list("pk", "lease_owner"))
    if len(owners) < len(ids):
        return None
    return {pk: int(owner.rsplit(":", 1)[1]) for pk, owner in owners.items()}


def _all_ended(ids: list[str]) -> bool:
    return Run.objects.filter(pk__in=ids, status="succeeded").count() == len(ids)


def test_a_packed_host_holds_light_runs_in_one_process_and_spreads_them_with_packing_off(
        tmp_path):
    spread: dict[str, set[int]] = {}
    for name, env in (("packed", {}), ("spread", {"AGENTOPS_PACK_CPU": "0"})):
        worker = _host(tmp_path, name, **env)
        try:
            ids = _start(RUNS, 6, name)
            held = wait_until(lambda ids=ids: _holders(ids), 30, f"{name}: every run held")
            spread[name] = set(held.values())
            assert spread[name] <= worker.pids()
            wait_until(lambda ids=ids: _all_ended(ids), 60, f"{name}: every run to succeed")
        finally:
            worker.stop()
    assert len(spread["packed"]) == 1, spread
    assert len(spread["spread"]) == 2, spread  # q2 alone: 10 ticks over two processes


def test_a_full_first_process_leaves_the_next_runs_to_the_second_and_a_killed_one_is_replaced(
        tmp_path):
    worker = _host(tmp_path, "full", AGENTOPS_RUNS_IN_FLIGHT="3")
    try:
        ids = _start(6, 4, "full")
        held = wait_until(lambda: _holders(ids), 30, "six runs held by two processes")
        per_pid = sorted(list(held.values()).count(pid) for pid in set(held.values()))
        assert per_pid == [3, 3]  # three slots each: the first full, the second took the rest
        os.kill(min(held.values()), signal.SIGKILL)  # q2 replaces it; its runs are recovered
        wait_until(lambda: _all_ended(ids), 60, "every run to succeed")
    finally:
        worker.stop()
