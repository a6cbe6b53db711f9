"""What ``make demo`` starts, on a free port and a fresh SQLite file: seeded states, live batch.

Runs the launcher as a real subprocess (daphne + the worker under it), reads the demo's own
SQLite file directly (not the test database), and stops it with SIGTERM as Ctrl-C would.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentops.demo.seed import SCENARIOS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]
SETTLE_S = 90
NEWS_WAIT_S = 3  # the launcher tells the live runs' news every 2 s


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "TEST_DATABASE_NAME", "AGENTOPS_AGENTS", "REDIS_URL")}
    # The live runs are paced for a person to watch (minutes); the test paces them in seconds.
    env.update(AGENTOPS_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1", LOG_LEVEL="WARNING",
               AGENTOPS_DEMO_PACE_S="0.2", AGENTOPS_DEMO_APPROVAL_DELAY_S="8")
    return env


def _states(db: Path) -> dict[str, str]:
    """Return each seeded run's state (status[:wait kind or attention reason]) by scenario."""
    with sqlite3.connect(db, timeout=20) as conn:
        rows = conn.execute("SELECT idempotency_key, status, wait_kind, attention_reason "
                            "FROM runs_run WHERE idempotency_key LIKE 'demo:%'").fetchall()
    out = {}
    for key, status, wait_kind, reason in rows:
        extra = wait_kind if status == "waiting" else reason if status == "blocked" else ""
        out[key.removeprefix("demo:")] = f"{status}:{extra}" if extra else status
    return out


def _duplicates(db: Path) -> list[tuple]:
    with sqlite3.connect(db, timeout=20) as conn:
        return conn.execute("SELECT kind, key, COUNT(*) FROM demo_worldeffect "
                            "GROUP BY kind, key HAVING COUNT(*) > 1").fetchall()


def _get(url: str) -> int:
    return _fetch(url)[0]


def _fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def test_demo_seeds_every_state_serves_and_stops_cleanly(tmp_path):
    env, port, db = _env(tmp_path), _free_port(), tmp_path / "agentops.sqlite3"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT,
                   env=env, check=True, timeout=120)
    log = (tmp_path / "demo.log").open("wb")
    # As `make demo` does: the banner's time counts from when make started (here 100 s ago).
    env["AGENTOPS_DEMO_MAKE_STARTED"] = str(int(time.time()) - 100)
    proc = subprocess.Popen([sys.executable, "-m", "agentops.demo", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    expected = {sc.name: sc.expect for sc in SCENARIOS}
    try:
        deadline, states = time.monotonic() + SETTLE_S, {}
        while time.monotonic() < deadline and states != expected:
            assert proc.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
            time.sleep(1)
            states = _states(db) if db.exists() else {}
        assert states == expected, (tmp_path / "demo.log").read_text()[-3000:]
        assert _get(f"http://127.0.0.1:{port}/login/") == 200
        assert _get(f"http://127.0.0.1:{port}/") in (200, 302)
        assert _duplicates(db) == []
        output = (tmp_path / "demo.log").read_text()
        assert f"http://127.0.0.1:{port}/" in output and "demo-operator-pw" in output
        # The failures seeded on purpose are logged to the server log, not before the banner.
        before_banner = output.split("AgentOps demo is up")[0]
        assert "WARNING" not in before_banner and str(tmp_path / "demo-server.log") in output
        assert "WARNING agentops.engine" in (tmp_path / "demo-server.log").read_text()
        # The banner's time includes what ran before the launcher, and says so.
        assert re.search(r"up [1-3] min \d+ s after `make demo` started, install and migrate included",
                         output)
        # At the banner the batch and the delayed approval were live, and it said so.
        live = output.split("Live now on the worker")[1].split("Ctrl-C")[0]
        assert "document-batch" in live and "refund-approval-later" in live
        assert "refund-approval-late " in live
        # DEBUG is off: no technical 404 page, static files still served (whitenoise).
        status, body = _fetch(f"http://127.0.0.1:{port}/no-such-page/")
        assert status == 404 and "URLconf" not in body
        status, css = _fetch(f"http://127.0.0.1:{port}/static/console.css")
        assert status == 200 and ".expiry" in css
        time.sleep(NEWS_WAIT_S)
        server_log = (tmp_path / "demo-server.log").read_text()
        assert server_log.count("Not Found: /no-such-page/") == 1
        assert "Traceback" not in server_log
        # Requests are in the access log, not in the terminal; what the live runs did is.
        assert "/static/console.css" in (tmp_path / "demo-access.log").read_text()
        terminal = (tmp_path / "demo.log").read_text().split("Ctrl-C stops everything")[1]
        assert "console.css" not in terminal and "no-such-page" not in terminal
        assert re.search(r"document-batch: \d+ of 12 child runs ended", terminal), terminal
        assert "document-batch: the batch succeeded" in terminal, terminal
        for name in ("refund-approval-later", "refund-approval-late"):
            assert re.search(rf"{name}: its refund approval is waiting in the inbox: "
                             rf"http://127.0.0.1:{port}/approvals/\?focus=\d+", terminal), terminal
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0
    assert "Demo stopped." in (tmp_path / "demo.log").read_text()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_banner_time_says_what_it_counts():
    from agentops.demo.launch import banner_timing

    alone = banner_timing(1000.0, 979.7, None)
    assert alone.startswith("seeding and starting took 20.3 s") and "not counted" in alone
    via_make = banner_timing(1000.0, 979.7, "746")
    assert via_make.startswith("up 4 min 14 s after `make demo` started, install and migrate")
    assert "seeding and starting alone took 20.3 s" in via_make
    assert banner_timing(1000.0, 979.7, "not-a-number").startswith("seeding and starting took")
