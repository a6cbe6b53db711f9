"""``make demo``: seed the demo, start the web server and a worker, stop them on Ctrl-C.

``manage.py migrate`` runs first (in the Makefile); ``demo_main`` seeds (idempotently), starts
daphne (ASGI) and ``manage.py agentops worker`` (the q2 cluster plus the sweeper) as child
processes with DEBUG off (static files served by whitenoise from the source folders, plain
HTTP on 127.0.0.1, the launcher's SECRET_KEY), prints the URL, the demo logins and what is
live right now, and on SIGINT/SIGTERM stops both, waiting for each to exit. Also runnable
alone: ``python -m agentops.demo --port 8000`` (``agentops/demo/__main__.py`` sets Django up
first, since this module imports models).

The terminal keeps what a person reads: the launcher's lines, the banner, then a line per
change in the live runs (agentops.demo.progress). The rest goes to files under var/: the
engine's log of the seeded failures and the servers' output to ``demo-server.log``, the web
server's access log (every poll, every websocket connect) to ``demo-access.log``.

The banner's time counts from ``AGENTOPS_DEMO_MAKE_STARTED`` (epoch seconds, set by the
Makefile when ``make demo`` starts, so install and migrate are included) when it is set, and
says plainly that it counts only seeding and starting when it is not.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from agentops.demo.progress import DemoProgress
from agentops.demo.seed import approval_delay_s, demo_pace_s, demo_seed, is_live, run_state

STOP_WAIT_S = 10.0
READY_WAIT_S = 30.0
NEWS_EVERY_S = 2.0
SERVER_LOG = "demo-server.log"
ACCESS_LOG = "demo-access.log"


def demo_main(port: int, *, out: IO[str] | None = None) -> int:
    """Seed, serve on 127.0.0.1:``port`` with a worker, until SIGINT/SIGTERM; return an exit code."""
    out = out or sys.stdout
    started = time.time()
    logs = Path(settings.VAR_DIR)
    logs.mkdir(parents=True, exist_ok=True)
    _say(out, "Seeding demo users and runs (in-process, ~5-20 s); the engine's log of the "
              f"failures seeded on purpose goes to {logs / SERVER_LOG}...")
    with _logged_to(logs / SERVER_LOG):
        logins, runs = demo_seed()
    stop = threading.Event()
    _on_stop_signals(stop)
    env = demo_env()
    _say(out, "Starting the web server (daphne) and a worker (DEBUG off)...")
    with (logs / SERVER_LOG).open("ab") as server_log:
        procs = {"web": _spawn(_web_command(port, logs / ACCESS_LOG), env, server_log),
                 "worker": _spawn(_worker_command(), env, server_log)}
    try:
        if not _wait_listening(port, procs["web"], stop):
            _say(out, f"the web server did not start on port {port}:\n{_tail(logs / SERVER_LOG)}")
            return 1
        for run in runs.values():
            run.refresh_from_db()
        _banner(out, port, logins, runs,
                banner_timing(time.time(), started, os.environ.get("AGENTOPS_DEMO_MAKE_STARTED")),
                logs)
        progress = DemoProgress({n: r for n, r in runs.items() if is_live(r)},
                                f"http://127.0.0.1:{port}/")
        return _supervise(procs, stop, out, progress, logs / SERVER_LOG)
    finally:
        _stop_all(procs)
        _say(out, "Demo stopped.")


@contextmanager
def _logged_to(path: Path) -> Iterator[None]:
    """Send this process's log records to ``path`` instead of the terminal inside the block."""
    root = logging.getLogger()
    kept = root.handlers[:]
    handler = logging.FileHandler(path, encoding="utf-8")
    for old in kept:
        handler.setFormatter(old.formatter)
        for log_filter in old.filters:
            handler.addFilter(log_filter)
    root.handlers = [handler]
    try:
        yield
    finally:
        root.handlers = kept
        handler.close()


def _tail(path: Path, lines: int = 20) -> str:
    """Return the last ``lines`` lines of the log at ``path``, saying where the rest is."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        text = []
    return "\n".join([*text, f"(the servers' whole log: {path})"])


def _web_command(port: int, access_log: Path) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
            "--access-log", str(access_log), "agentops.asgi:application"]


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


def _spawn(command: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group (so we stop it, and its children, whole),
    its output appended to ``log``."""
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, start_new_session=True,
                            stdout=log, stderr=subprocess.STDOUT)


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
               out: IO[str], progress: DemoProgress, log: Path) -> int:
    """Wait for a stop signal, telling what changes in the live runs; if a child dies first,
    say which (with the end of its log) and return 1."""
    progress.news()  # what the banner showed
    next_news = time.monotonic() + NEWS_EVERY_S
    while not stop.wait(0.5):
        for name, proc in procs.items():
            if proc.poll() is not None:
                _say(out, f"the {name} process exited with code {proc.returncode}; stopping. "
                          f"The end of its log:\n{_tail(log)}")
                return 1
        if time.monotonic() >= next_news:
            next_news = time.monotonic() + NEWS_EVERY_S
            for line in progress.news():
                _say(out, line)
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
                    f"~{demo_pace_s():g} s each on {settings.Q_CLUSTER['workers']} workers, "
                    "ending one at a time from the first seconds (one child hits a model "
                    "outage and retries)")
        elif run.status == "waiting" and run.wait_until:
            what = (f"waiting for the carrier's rate limit; its refund approval arrives in the "
                    f"inbox at about {run.wait_until:%H:%M:%S} UTC")
        else:
            what = (f"{run.status}: its carrier is rate-limited for "
                    f"{approval_delay_s(name):g} s, then its refund approval arrives in the inbox")
        lines.append(f"  {name:<22} {what}")
    return lines


def _banner(out: IO[str], port: int, logins: list[tuple[str, str, str, str]],
            runs: dict[str, Any], timing: str, logs: Path | None = None) -> None:
    lines = ["", f"AgentOps demo is up:  http://127.0.0.1:{port}/", f"  ({timing})", "",
             "Demo logins (DEMO ONLY, never use these passwords anywhere else):"]
    lines += [f"  {u:<13} {p:<22} role: {r} in {f'team {t} only' if t else 'every team'}"
              for u, p, r, t in logins]
    lines += ["", "Seeded runs, settled (the same on every launch):"]
    lines += [f"  {name:<22} {run_state(run)}" for name, run in runs.items() if not is_live(run)]
    live = live_lines(runs)
    if live:
        lines += ["", "Live now on the worker (watch the queue and the approvals inbox; each "
                      "change is also told below):", *live]
    else:
        lines += ["", "Nothing is running live right now."]
    if logs is not None:
        lines += ["", f"Logs: {logs / SERVER_LOG} (web server, worker, the seeded failures), "
                      f"{logs / ACCESS_LOG} (every request)."]
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
