"""A real local HTTP server speaking a model provider's wire protocol, scripted per request.

Tests push answers (JSON bodies or server-sent event streams) in the order requests will
arrive; the real ``openai`` / ``anthropic`` SDK clients talk to it over TCP.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """One scripted HTTP answer: a JSON body (``raw``: these bytes as it), or SSE events
    ``(event name or "", data)`` followed by ``tail`` (raw bytes: half an event, garbage)
    before the connection closes; given ``delay_s`` after the request arrived."""

    status: int = 200
    body: Any = None
    events: list[tuple[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay_s: float = 0.0
    tail: bytes = b""


@dataclass
class FakeProvider:
    """The scripted answers still to give and the requests received so far."""

    base_url: str = ""
    answers: list[Answer] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Given, it answers every request (its recorded dict) instead of the queued answers.
    reply: Callable[[dict[str, Any]], Answer] | None = None

    def push(self, *answers: Answer) -> None:
        """Queue answers for the next requests, in order."""
        self.answers.extend(answers)


def _handler(state: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            """Record the request and give the next scripted answer."""
            length = int(self.headers.get("content-length", 0))
            raw = self.rfile.read(length)
            request = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                       "json": json.loads(raw or b"{}"), "raw": raw}
            state.requests.append(request)
            if state.reply is not None:
                answer = state.reply(request)
            else:
                answer = state.answers.pop(0) if state.answers else Answer(500, {"error": "no answer"})
            time.sleep(answer.delay_s)
            if answer.events is not None:
                self._stream(answer)
            else:
                self._json(answer)

        def _json(self, answer: Answer) -> None:
            payload = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, answer: Answer) -> None:
            self.send_response(answer.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for name, data in answer.events or ():
                line = f"event: {name}\n" if name else ""
                text = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write(f"{line}data: {text}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(answer.tail)
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            """Keep pytest's output free of access-log lines."""

    return Handler


@contextmanager
def fake_provider(prefix: str = "") -> Iterator[FakeProvider]:
    """Serve a FakeProvider on a free 127.0.0.1 port; ``base_url`` ends with ``prefix``."""
    state = FakeProvider()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}{prefix}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


# --- OpenAI chat completions --------------------------------------------------------------

def oa_completion(*, text: str = "", calls: list[tuple[str, Any]] = (), finish: str = "") -> Answer:
    """Return a chat.completion answer with text and/or tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
            for i, (n, a) in enumerate(calls)]
    return Answer(body={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})


def oa_stream(pieces: list[str], *, call: tuple[str, str] | None = None) -> Answer:
    """Return a streamed chat completion: text pieces, then an optional tool call in parts."""
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict:
        out = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
               "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            out["usage"] = usage
        return out

    events = [("", chunk({"role": "assistant", "content": p})) for p in pieces]
    if call:
        name, args = call
        half = len(args) // 2
        events.append(("", chunk({"tool_calls": [{"index": 0, "id": "call_s", "type": "function",
                                                  "function": {"name": name, "arguments": args[:half]}}]})))
        events.append(("", chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]})))
    events.append(("", chunk({}, "tool_calls" if call else "stop")))
    events.append(("", chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 4,
                                        "total_tokens": 13})))
    events.append(("", "[DONE]"))
    return Answer(events=events)


# --- Anthropic messages --------------------------------------------------------------------

def an_message(*, text: str = "", calls: list[tuple[str, dict]] = (), stop: str = "") -> Answer:
    """Return a Messages API answer with text and/or tool_use blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a}
                for i, (n, a) in enumerate(calls)]
    return Answer(body={"id": "msg_1", "type": "message", "role": "assistant",
                        "model": "claude-fake", "content": content,
                        "stop_reason": stop or ("tool_use" if calls else "end_turn"),
                        "stop_sequence": None,
                        "usage": {"input_tokens": 20, "output_tokens": 7}})


def an_stream(pieces: list[str]) -> Answer:
    """Return a streamed Messages API answer of text pieces."""
    start = {"type": "message_start", "message": {
        "id": "msg_s", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 15, "output_tokens": 1}}}
    events = [("message_start", start),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": p}})
               for p in pieces]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": 6}}),
               ("message_stop", {"type": "message_stop"})]
    return Answer(events=events)


def an_error(status: int, kind: str, message: str) -> Answer:
    """Return an Anthropic error answer."""
    return Answer(status, {"type": "error", "error": {"type": kind, "message": message}})
