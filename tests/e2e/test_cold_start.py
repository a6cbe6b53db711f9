"""A fresh server process answering 20 concurrent first requests knows every agent.

The registry used to mark itself loaded before importing the agent modules, so the first
request imported them while 19 others saw an empty registry and got ``unknown_agent``.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.e2e.workers import ROOT, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONCURRENT = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the server did not listen in time")


def _post(url: str, key: str, body: dict, out: list, barrier: threading.Barrier) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}",
                                          "Content-Type": "application/json"})
    barrier.wait()
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            out.append((resp.status, resp.read().decode()))
    except urllib.error.HTTPError as exc:
        out.append((exc.code, exc.read().decode()))


def test_twenty_concurrent_first_requests_all_find_the_agent(tmp_path):
    from django.contrib.auth.models import Group, User

    from approvals.apikeys import apikey_create
    from runs.models import Run

    user = User.objects.create_user(username="cold-operator", password="pw-for-tests-only")
    user.groups.add(Group.objects.get_or_create(name="operators")[0])  # a flush may have run
    _, key = apikey_create(user=user, name="cold")
    port = _free_port()
    env = {**worker_env(), "AGENTOPS_AGENTS": "tests.cold_agents", "AGENTOPS_ENQUEUE_TICKS": "0"}
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload",
                             "--skip-checks", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_listening(port, proc)
        out: list = []
        barrier = threading.Barrier(CONCURRENT)
        threads = [threading.Thread(target=_post, args=(
            f"http://127.0.0.1:{port}/api/runs", key,
            {"agent": "cold-agent", "goal": f"cold {i}"}, out, barrier))
            for i in range(CONCURRENT)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        proc.terminate()
        proc.wait(10)
    statuses = [status for status, _ in out]
    assert statuses == [201] * CONCURRENT, [body for status, body in out if status != 201][:3]
    assert Run.objects.filter(agent_name="cold-agent").count() == CONCURRENT
