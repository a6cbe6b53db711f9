"""``make demo``: seed the demo, start the web server and a worker, stop them on Ctrl-C.

``manage.py migrate`` runs first (in the Makefile); ``demo_main`` seeds (idempotently), starts
daphne (ASGI) and ``manage.py agentops worker`` (the q2 cluster plus the sweeper) as child
processes with DEBUG off (static files served by whitenoise from the source folders, plain
HTTP on 127.0.0.1, the launcher's SECRET_KEY), prints the URL, the demo logins and what is
live right now, and on SIGINT/SIGTERM stops both, waiting for each to exit. Also runnable
alone: ``python -m agentops.demo --port 8000`` (``agentops/demo/__main__.py`` sets Django up
first, since this module imports models).

The banner's time counts from ``AGENTOPS_DEMO_MAKE_STARTED`` (epoch seconds, set by the
Makefile when ``make demo`` starts, so install and migrate are included) when it is set, and
says plainly that it counts only seeding and starting when it is not.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from agentops.demo.seed import demo_approval_delay_s, demo_pace_s, demo_seed, is_live, run_state

STOP_WAIT_S = 10.0
READY_WAIT_S = 30.0


def demo_main(port: int, *, out: IO[str] | None = None) -> int:
    """Seed, serve on 127.0.0.1:``port`` with a worker, until SIGINT/SIGTERM; return an exit code."""
    out = out or sys.stdout
    started = time.time()
    _say(out, "Seeding demo users and runs (in-process, ~5-20 s)...")
    logins, runs = demo_seed()
    stop = threading.Event()
    _on_stop_signals(stop)
    env = demo_env()
    _say(out, "Starting the web server (daphne) and a worker (DEBUG off)...")
    procs = {"web": _spawn(_web_command(port), env), "worker": _spawn(_worker_command(), env)}
    try:
        if not _wait_listening(port, procs["web"], stop):
            _say(out, f"the web server did not start on port {port}; see its output above")
            return 1
        for run in runs.values():
            run.refresh_from_db()
        _banner(out, port, logins, runs,
                banner_timing(time.time(), started, os.environ.get("AGENTOPS_DEMO_MAKE_STARTED")))
        return _supervise(procs, stop, out)
    finally:
        _stop_all(procs)
        _say(out, "Demo stopped.")


def _web_command(port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
            "agentops.asgi:application"]


def _worker_command() -> list[str]:
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "agentops", "worker"]


def demo_env() -> dict[str, str]:
    """The web server's and worker's environment: DEBUG off, plain HTTP, static from source.

    They get this process's SECRET_KEY: the ticks seeding enqueues are signed with it, and a
    worker with another key would refuse them. ``make demo`` sets a random one kept in var/.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AGENTOPS_DEBUG": "0", "AGENTOPS_HTTPS": "0",
           "AGENTOPS_STATIC_FINDERS": "1", "ALLOWED_HOSTS": "127.0.0.1,localhost",
           "SECRET_KEY": settings.SECRET_KEY}
    env.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
    return env


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group, so we stop it (and its children) whole."""
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, start_new_session=True)


def _on_stop_signals(stop: threading.Event) -> None:
    # Children run in their own sessions, so Ctrl-C reaches only us; we stop them in order.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())


def _wait_listening(port: int, web: subprocess.Popen[bytes], stop: threading.Event) -> bool:
    """Wait until something accepts connections on the port; False if the server died."""
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline and not stop.is_set():
        if web.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.2)
    return stop.is_set()


def _supervise(procs: dict[str, subprocess.Popen[bytes]], stop: threading.Event,
               out: IO[str]) -> int:
    """Wait for a stop signal; if a child dies first, say which and return 1."""
    while not stop.wait(0.5):
        for name, proc in procs.items():
            if proc.poll() is not None:
                _say(out, f"the {name} process exited with code {proc.returncode}; stopping")
                return 1
    return 0


def _stop_all(procs: dict[str, Any]) -> None:
    """SIGTERM each process group, wait for them, SIGKILL what is still alive."""
    for proc in procs.values():
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    for proc in procs.values():  # q2's worker processes may outlive their sentinel
        _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def banner_timing(now: float, started: float, make_started: str | None) -> str:
    """Say how long the demo took to come up, and what that time includes."""
    mine = now - started
    try:
        since_make = now - float(make_started) if make_started else None
    except ValueError:
        since_make = None
    if since_make is not None and since_make >= mine:
        return (f"up {_duration(since_make)} after `make demo` started, install and migrate "
                f"included; seeding and starting alone took {_duration(mine)}")
    return (f"seeding and starting took {_duration(mine)}; any install or migrate before "
            "this command is not counted")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{seconds:.1f} s"


def live_lines(runs: dict[str, Any]) -> list[str]:
    """One line per run that moves on its own right now, saying what to watch and when."""
    lines = []
    for name, run in runs.items():
        if not is_live(run):
            continue
        if run.agent_name == "document-batch":
            docs, size = run.input.get("documents", 0), max(run.input.get("batch_size", 1), 1)
            what = (f"{run.status}: {docs} documents in {-(-docs // size)} child runs of "
                    f"~{demo_pace_s():g} s each on {settings.Q_CLUSTER['workers']} workers "
                    "(a few minutes; some children hit a model outage and retry)")
        elif run.status == "waiting" and run.wait_until:
            what = (f"waiting for the carrier's rate limit; its refund approval arrives in the "
                    f"inbox at about {run.wait_until:%H:%M:%S} UTC")
        else:
            what = (f"{run.status}: its carrier is rate-limited for {demo_approval_delay_s():g} s, "
                    "then its refund approval arrives in the inbox")
        lines.append(f"  {name:<22} {what}")
    return lines


def _banner(out: IO[str], port: int, logins: list[tuple[str, str, str]],
            runs: dict[str, Any], timing: str) -> None:
    lines = ["", f"AgentOps demo is up:  http://127.0.0.1:{port}/", f"  ({timing})", "",
             "Demo logins (DEMO ONLY, never use these passwords anywhere else):"]
    lines += [f"  {u:<9} {p:<18} role: {r}" for u, p, r in logins]
    lines += ["", "Seeded runs, settled (the same on every launch):"]
    lines += [f"  {name:<22} {run_state(run)}" for name, run in runs.items() if not is_live(run)]
    live = live_lines(runs)
    if live:
        lines += ["", "Live now on the worker (watch the queue and the approvals inbox):", *live]
    else:
        lines += ["", "Nothing is running live right now."]
    lines += ["", "Ctrl-C stops everything. `make demo-reset` deletes the demo database.", ""]
    _say(out, "\n".join(lines))


def _say(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the demo from the command line (``python -m agentops.demo``; Django is set up)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    return demo_main(args.port)
