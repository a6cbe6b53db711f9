"""A local model server speaking OpenAI chat completions that sleeps L seconds per call.

Run it as its own process (``python -m bench.model_server --delay 1 --steps 3 --port 0``):
it prints its port on stdout. Each conversation (told apart by its first user message, the
run's goal) gets ``steps`` replies asking for the ``noop`` tool, then "done" (a plan request
gets a one-step plan). It counts calls itself: the engine's context shows only recent turns. The
engine talks to it through the real ``openai`` client (agentops.llm.openai_compat).
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


def reply_for(request: dict[str, Any], steps: int) -> dict[str, Any]:
    """Return the chat.completion body answering ``request``."""
    names = {t.get("function", {}).get("name") for t in request.get("tools") or ()}
    goal = next((str(m.get("content")) for m in request.get("messages", ())
                 if m.get("role") == "user"), "")
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
        time.sleep(self.delay_s)
        data = json.dumps(reply_for(json.loads(body or b"{}"), self.steps)).encode()
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
