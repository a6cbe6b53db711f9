"""A fake OpenAI-compatible model server for testing an agent without a real model.

It answers ``POST …/chat/completions`` from a script keyed by the step and turn the engine
names in its last message (``## Current step: KEY (turn N)``), plainly or streamed (when the
request asks ``"stream": true``), so an agent without ``model=`` runs through the real
OpenAI-compatible client against it. A reply is ``{"text": "..."}`` (ends the step) or
``{"call": "tool", "args": {...}}`` (asks for a tool call); a turn past the step's list
answers ``{"text": "done"}``, so a short script never loops. Start it in a test with
``FakeModelServer(script)`` (a context manager), or from a shell::

    python -m agentops.llm.fake_server --script replies.json --port 8099
    AGENTOPS_MODEL_BASE_URL=http://127.0.0.1:8099/v1 AGENTOPS_MODEL_NAME=fake ...

Every request received is kept in ``requests`` (its JSON body), to check what was sent.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STEP_MARKER = re.compile(r"^## Current step: (?P<step>\S*) \(turn (?P<turn>\d+)\)", re.M)
DEFAULT_REPLY: dict[str, Any] = {"text": "done"}
Script = dict[str, list[dict[str, Any]]]


def reply_for(script: Script, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the scripted reply for the step and turn the last step marker names."""
    for msg in reversed(messages):
        found = STEP_MARKER.search(str(msg.get("content") or ""))
        if found:
            replies = script.get(found["step"], script.get("*", []))
            turn = int(found["turn"])
            return replies[turn - 1] if turn <= len(replies) else DEFAULT_REPLY
    return DEFAULT_REPLY


def _message(reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
    if reply.get("call"):
        message["tool_calls"] = [{"id": "call_0", "type": "function", "function": {
            "name": reply["call"], "arguments": json.dumps(reply.get("args") or {})}}]
    return message


def _completion(reply: dict[str, Any], model: str) -> dict[str, Any]:
    finish = "tool_calls" if reply.get("call") else "stop"
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": _message(reply), "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _chunks(reply: dict[str, Any], model: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [{"index": 0, "delta": delta,
                                             "finish_reason": finish}]}

    text = reply.get("text") or ""
    out = [chunk({"role": "assistant", "content": text[i:i + 8]})
           for i in range(0, len(text), 8)] or [chunk({"role": "assistant", "content": ""})]
    if reply.get("call"):
        call = _message(reply)["tool_calls"][0]
        out.append(chunk({"tool_calls": [{"index": 0, **call}]}))
    out.append(chunk({}, "tool_calls" if reply.get("call") else "stop"))
    return out


class FakeModelServer:
    """Serve ``script`` on 127.0.0.1 (a free port unless ``port``); ``base_url`` ends in /v1."""

    def __init__(self, script: Script, *, port: int = 0) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread: threading.Thread | None = None

    def start(self) -> FakeModelServer:
        """Start answering in a background thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="fake-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering and close the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def serve(self) -> None:
        """Answer in this thread until interrupted (the ``python -m`` entry point)."""
        try:
            self._httpd.serve_forever(0.2)
        finally:
            self._httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            """Answer a chat completion from the script (404 for any other path)."""
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0)))
                              or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            server.requests.append(body)
            reply = reply_for(server.script, body.get("messages") or [])
            model = str(body.get("model") or "fake")
            if body.get("stream"):
                return self._stream(_chunks(reply, model))
            return self._send(200, _completion(reply, model))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, chunks: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for c in chunks:
                self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test's output free of access-log lines."""

    return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve a script file (JSON: step key -> list of replies) until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m agentops.llm.fake_server")
    parser.add_argument("--script", required=True, help="JSON file: step key -> replies")
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args(argv)
    server = FakeModelServer(json.loads(Path(args.script).read_text()), port=args.port)
    print(f"fake model at {server.base_url} (AGENTOPS_MODEL_BASE_URL)", file=sys.stderr)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
