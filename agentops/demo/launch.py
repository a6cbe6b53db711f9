"""``make demo``: seed the demo, start the web server and a worker, stop them on Ctrl-C.

``manage.py migrate`` runs first (in the Makefile); ``demo_main`` seeds (idempotently), starts
daphne (ASGI) and ``manage.py agentops worker`` (the q2 cluster plus the sweeper) as child
processes, prints the URL and the demo logins, and on SIGINT/SIGTERM stops both, waiting for
each to exit. Also runnable alone: ``python -m agentops.demo.launch --port 8000``.
"""
from __future__ import annotations

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

STOP_WAIT_S = 10.0
READY_WAIT_S = 30.0


def demo_main(port: int, *, out: IO[str] | None = None) -> int:
    """Seed, serve on 127.0.0.1:``port`` with a worker, until SIGINT/SIGTERM; return an exit code."""
    from agentops.demo.seed import demo_seed, run_state

    out = out or sys.stdout
    started = time.monotonic()
    _say(out, "Seeding demo users and runs (in-process)...")
    logins, runs = demo_seed()
    stop = threading.Event()
    _on_stop_signals(stop)
    procs = {"web": _spawn(_web_command(port)), "worker": _spawn(_worker_command())}
    try:
        if not _wait_listening(port, procs["web"], stop):
            _say(out, f"the web server did not start on port {port}; see its output above")
            return 1
        _banner(out, port, logins, {n: run_state(r) for n, r in runs.items()},
                time.monotonic() - started)
        return _supervise(procs, stop, out)
    finally:
        _stop_all(procs)
        _say(out, "Demo stopped.")


def _web_command(port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
            "agentops.asgi:application"]


def _worker_command() -> list[str]:
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "agentops", "worker"]


def _spawn(command: list[str]) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group, so we stop it (and its children) whole."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
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


def _banner(out: IO[str], port: int, logins: list[tuple[str, str, str]],
            states: dict[str, str], seconds: float) -> None:
    lines = ["", f"AgentOps demo is up after {seconds:.1f}s:  http://127.0.0.1:{port}/", "",
             "Demo logins (DEMO ONLY, never use these passwords anywhere else):"]
    lines += [f"  {u:<9} {p:<18} role: {r}" for u, p, r in logins]
    lines += ["", "Seeded runs:"]
    lines += [f"  {name:<22} {state}" for name, state in states.items()]
    lines += ["", "The document batch runs live on the worker. Ctrl-C stops everything.", ""]
    _say(out, "\n".join(lines))


def _say(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the demo from the command line (``python -m agentops.demo.launch``)."""
    import argparse

    import django

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
    django.setup()
    return demo_main(args.port)


if __name__ == "__main__":
    sys.exit(main())
