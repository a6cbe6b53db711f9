"""A local model server speaking OpenAI chat completions that sleeps L seconds per call.

Run it as its own process (``python -m bench.model_server --delay 1 --steps 3 --port 0``):
it prints its port on stdout. Each conversation (told apart by its first user message, the
run's goal) gets ``steps`` replies asking for the ``noop`` tool, then "done" (a plan request
gets a one-step plan). It counts calls itself: the engine's context shows only recent turns. The
engine talks to it through the real ``openai`` client (agentops.llm.openai_compat).

It also counts, for a benchmark to read the same way whatever engine calls it:
``GET /stats`` gives the requests being served now (``current``: runs waiting on their model),
the most at once (``peak``) and the replies sent (``total``); ``GET /stats/replies`` gives
each conversation's reply times (Unix seconds); ``POST /stats/reset`` starts both afresh
(``peak`` from the requests being served). The reply logic itself is not reset.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


_CALLS: dict[str, int] = {}
_LOCK = threading.Lock()
_STATS = {"current": 0, "peak": 0, "total": 0}
_REPLIES: dict[str, list[float]] = {}


def _goal(request: dict[str, Any]) -> str:
    """Return the conversation's key: its first user message (the run's goal)."""
    return next((str(m.get("content")) for m in request.get("messages", ())
                 if m.get("role") == "user"), "")


def _started() -> None:
    with _LOCK:
        _STATS["current"] += 1
        _STATS["peak"] = max(_STATS["peak"], _STATS["current"])


def _ended(goal: str | None) -> None:
    """Count a request as served; ``goal`` None when it got no reply (it failed)."""
    with _LOCK:
        _STATS["current"] -= 1
        if goal is not None:
            _STATS["total"] += 1
            _REPLIES.setdefault(goal, []).append(time.time())


def stats_reset() -> None:
    """Start the counts afresh: peak from the requests being served now, no replies."""
    with _LOCK:
        _STATS.update(peak=_STATS["current"], total=0)
        _REPLIES.clear()


def reply_for(request: dict[str, Any], steps: int) -> dict[str, Any]:
    """Return the chat.completion body answering ``request``."""
    names = {t.get("function", {}).get("name") for t in request.get("tools") or ()}
    goal = _goal(request)
    with _LOCK:
        done = _CALLS.get(goal, 0)
        _CALLS[goal] = done + 1
    if "propose_plan" in names:
        call = ("propose_plan", {"steps": [{"key": "s", "title": "s", "depends_on": []}]})
    elif done < steps and "noop" in names:
        call = ("noop", {"i": done + 1})
    else:
        call = None
    message: dict[str, Any] = {"role": "assistant", "content": None if call else "done"}
    if call:
        message["tool_calls"] = [{"id": f"call_{done}", "type": "function",
                                  "function": {"name": call[0],
                                               "arguments": json.dumps(call[1])}}]
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
            "model": request.get("model", "sleepy"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
    # The headers and the body go out in two writes: with Nagle's algorithm the body waits
    # for the client's delayed ACK of the headers (~20-40 ms a call, which no real server adds).
    disable_nagle_algorithm = True
    delay_s = 1.0
    steps = 3

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/stats/reset":
            stats_reset()
            self._send({"reset": True})
            return
        _started()
        goal = None
        try:
            time.sleep(self.delay_s)
            request = json.loads(body or b"{}")
            self._send(reply_for(request, self.steps))
            goal = _goal(request)
        finally:
            _ended(goal)

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        with _LOCK:
            if path == "/stats":
                body: Any = dict(_STATS)
            elif path == "/stats/replies":
                body = {"replies": {g: list(ts) for g, ts in _REPLIES.items()}}
            else:
                body = None
        if body is None:
            self.send_error(404)
        else:
            self._send(body)

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 2048  # hundreds of runs connect at once
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a killed or stopped worker drops its connections: expected, not worth a trace


def model_server_start(delay_s: float, steps: int) -> tuple[subprocess.Popen, str]:
    """Start this server in its own process; return it and its OpenAI base URL."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "bench.model_server", "--delay", str(delay_s),
                             "--steps", str(steps)], cwd=root, stdout=subprocess.PIPE)
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline())}/v1"


def model_env(url: str) -> dict[str, str]:
    """Return the settings (as environment) that make the configured model this server."""
    return {"AGENTOPS_MODEL_PROVIDER": "openai", "AGENTOPS_MODEL_BASE_URL": url,
            "AGENTOPS_MODEL_NAME": "sleepy", "AGENTOPS_MODEL_TIMEOUT_S": "120"}


def stats_get(url: str, what: str = "") -> dict[str, Any]:
    """Return ``/stats`` (or ``/stats/<what>``) of the server whose OpenAI base URL is ``url``."""
    import urllib.request

    with urllib.request.urlopen(f"{_root(url)}/stats{'/' + what if what else ''}",
                                timeout=30) as resp:
        return json.loads(resp.read())


def stats_reset_at(url: str) -> None:
    """Reset the counts of the server whose OpenAI base URL is ``url``."""
    import urllib.request

    req = urllib.request.Request(f"{_root(url)}/stats/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=30):
        pass


def _root(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    _Handler.delay_s, _Handler.steps = args.delay, args.steps
    server = _Server(("127.0.0.1", args.port), _Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
