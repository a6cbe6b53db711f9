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
import asyncio
import json
import subprocess
import sys
import threading
import time
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


_REASONS = {200: "OK", 404: "Not Found", 400: "Bad Request"}


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 delay_s: float, steps: int) -> None:
    """Answer one keep-alive connection's requests, one after another, until it closes.

    An event loop, not a thread per connection: with hundreds of runs waiting at once a
    thread each cost this process more CPU than a reply (on the same cores as the engine
    measured); the peers meet the same server.
    """
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path, length = _request_line(head)
            body = await reader.readexactly(length) if length else b""
            status, answer = await _answer(method, path, body, delay_s=delay_s, steps=steps)
            data = json.dumps(answer).encode()
            writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s"
                         % (status, _REASONS[status].encode(), len(data), data))
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass  # the client closed (a killed or stopped worker drops its connections)
    finally:
        writer.close()


def _request_line(head: bytes) -> tuple[str, str, int]:
    """Return the method, path and Content-Length of a request's head."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip() or 0)
    return method, path.rstrip("/"), length


async def _answer(method: str, path: str, body: bytes, *, delay_s: float,
                  steps: int) -> tuple[int, Any]:
    """Return the status and JSON body answering one request."""
    if method == "GET":
        with _LOCK:
            if path == "/stats":
                return 200, dict(_STATS)
            if path == "/stats/replies":
                return 200, {"replies": {g: list(ts) for g, ts in _REPLIES.items()}}
        return 404, {"error": {"message": f"no {path}"}}
    if path == "/stats/reset":
        stats_reset()
        return 200, {"reset": True}
    _started()
    goal = None
    try:
        await asyncio.sleep(delay_s)
        request = json.loads(body or b"{}")
        answer = reply_for(request, steps)
        goal = _goal(request)
        return 200, answer
    except ValueError:
        return 400, {"error": {"message": "the body is not JSON"}}
    finally:
        _ended(goal)


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
    asyncio.run(_main(args.port, delay_s=args.delay, steps=args.steps))


async def _main(port: int, *, delay_s: float, steps: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, delay_s=delay_s, steps=steps), "127.0.0.1", port,
        backlog=2048)  # hundreds of runs connect at once
    print(server.sockets[0].getsockname()[1], flush=True)
    sys.stdout.close()
    await server.serve_forever()


if __name__ == "__main__":
    main()
