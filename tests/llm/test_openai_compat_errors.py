"""OpenAICompatClient against a local fake chat-completions server: replies and error mapping."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentops.errors import ConfigError
from agentops.llm.configured import openai_from_settings
from agentops.llm.openai_compat import OpenAICompatClient
from agentops.llm.protocol import (
    AuthError,
    ContextOverflow,
    InvalidRequest,
    ModelClient,
    ModelTimeout,
    RateLimited,
    ServerError,
)

API_KEY = "sk-test-SECRET-abc123"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@dataclass
class Canned:
    """One scripted HTTP answer of the fake server."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class FakeServer:
    """A chat-completions endpoint that answers with whatever the test scripted."""

    base_url: str
    answer: Canned = field(default_factory=Canned)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def client(self, *, timeout_s: float = 5, api_key: str = API_KEY) -> OpenAICompatClient:
        """Return a client pointed at this server."""
        return OpenAICompatClient(self.base_url, api_key, "fake-model", timeout_s=timeout_s)


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    """Build a request handler class bound to ``server``'s script."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers: clients reuse connections

        def do_POST(self) -> None:
            """Record the request, then answer as scripted."""
            length = int(self.headers.get("content-length", 0))
            server.requests.append(
                {
                    "path": self.path,
                    "authorization": self.headers.get("authorization"),
                    "peer": self.client_address,
                    "json": json.loads(self.rfile.read(length) or b"{}"),
                }
            )
            answer = server.answer
            time.sleep(answer.delay_s)
            payload = json.dumps(answer.body).encode()
            try:
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep pytest's output free of access-log lines."""

    return Handler


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    """Serve scripted chat-completions answers on a free 127.0.0.1 port."""
    state = FakeServer(base_url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def completion(message: dict[str, Any], finish: str = "stop", usage: Any = "default") -> dict:
    """Return a chat.completion body with one choice."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
    }
    if usage == "default":
        body["usage"] = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    elif usage is not None:
        body["usage"] = usage
    return body


def tool_call(arguments: str, name: str = "get_weather") -> dict[str, Any]:
    """Return one wire tool call."""
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


def error_body(message: str, code: str | None = None, type_: str = "invalid_request_error") -> dict:
    """Return an OpenAI-style error body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def ask(fake: FakeServer, **kwargs: Any) -> Any:
    """Send one user turn with the weather tool through a fresh client."""
    return fake.client(**kwargs).complete(
        messages=[{"role": "user", "content": "weather?"}], tools=TOOLS
    )


def test_client_satisfies_protocol(fake: FakeServer) -> None:
    assert isinstance(fake.client(), ModelClient)


def test_text_reply(fake: FakeServer) -> None:
    fake.answer = Canned(body=completion({"content": "Sunny."}))
    reply = ask(fake)
    assert reply.text == "Sunny."
    assert reply.tool_calls == ()
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 5)
    assert reply.finish_reason == "stop"
    assert fake.requests[0]["path"] == "/v1/chat/completions"
    assert fake.requests[0]["authorization"] == f"Bearer {API_KEY}"


def test_missing_usage_is_zero_and_none_content_is_empty(fake: FakeServer) -> None:
    fake.answer = Canned(body=completion({"content": None}, usage=None))
    reply = ask(fake)
    assert reply.text == ""
    assert reply.usage.total_tokens == 0


def test_tool_call_with_empty_content(fake: FakeServer) -> None:
    call = tool_call('{"city": "Paris"}')
    fake.answer = Canned(body=completion({"content": None, "tool_calls": [call]}, "tool_calls"))
    reply = ask(fake)
    assert reply.text == ""
    assert reply.finish_reason == "tool_calls"
    (request,) = reply.tool_calls
    assert request.name == "get_weather"
    assert request.arguments == {"city": "Paris"}
    assert request.raw_arguments == '{"city": "Paris"}'
    assert request.provider_id == "call_1"


@pytest.mark.parametrize("raw", ['{"city": "Par', "not json", "[1, 2]", '"Paris"'])
def test_unusable_arguments_become_none_and_raw_is_kept(fake: FakeServer, raw: str) -> None:
    fake.answer = Canned(body=completion({"content": "", "tool_calls": [tool_call(raw)]}))
    (request,) = ask(fake).tool_calls
    assert request.arguments is None
    assert request.raw_arguments == raw


def test_length_cut_mid_arguments_does_not_raise(fake: FakeServer) -> None:
    call = tool_call('{"city": "San Fr')
    fake.answer = Canned(body=completion({"content": None, "tool_calls": [call]}, "length"))
    reply = ask(fake)
    assert reply.finish_reason == "length"
    assert reply.tool_calls[0].arguments is None
    assert reply.tool_calls[0].raw_arguments == '{"city": "San Fr'


def test_dict_arguments_are_accepted(fake: FakeServer) -> None:
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
    }
    fake.answer = Canned(body=completion({"content": None, "tool_calls": [call]}))
    (request,) = ask(fake).tool_calls
    assert request.arguments == {"city": "Oslo"}
    assert json.loads(request.raw_arguments) == {"city": "Oslo"}


@pytest.mark.parametrize(("finish", "expected"), [("tool_calls", {}), ("length", None)])
def test_empty_arguments_mean_no_parameters_unless_cut_off(
    fake: FakeServer, finish: str, expected: dict | None
) -> None:
    fake.answer = Canned(body=completion({"content": None, "tool_calls": [tool_call("")]}, finish))
    (request,) = ask(fake).tool_calls
    assert request.arguments == expected


def test_legacy_function_call_is_read(fake: FakeServer) -> None:
    legacy = {"name": "get_weather", "arguments": '{"city": "Rome"}'}
    fake.answer = Canned(
        body=completion({"content": None, "function_call": legacy}, "function_call")
    )
    (request,) = ask(fake).tool_calls
    assert (request.name, request.arguments) == ("get_weather", {"city": "Rome"})


@pytest.mark.parametrize("body", ["not a completion", {"id": "x", "choices": []}])
def test_malformed_200_is_server_error(fake: FakeServer, body: Any) -> None:
    fake.answer = Canned(body=body)
    with pytest.raises(ServerError):
        ask(fake)


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_tool_choice_wire_form(fake: FakeServer, choice: Any, wire: Any) -> None:
    fake.answer = Canned(body=completion({"content": "ok"}))
    fake.client().complete(
        messages=[{"role": "user", "content": "x"}], tools=TOOLS, tool_choice=choice
    )
    assert fake.requests[0]["json"]["tool_choice"] == wire


def test_no_tool_choice_is_not_sent(fake: FakeServer) -> None:
    fake.answer = Canned(body=completion({"content": "ok"}))
    fake.client().complete(messages=[{"role": "user", "content": "x"}], tools=[], max_tokens=9)
    sent = fake.requests[0]["json"]
    assert "tool_choice" not in sent and "tools" not in sent
    assert sent["max_tokens"] == 9


def test_429_retry_after_seconds(fake: FakeServer) -> None:
    fake.answer = Canned(429, error_body("slow down", "rate_limit_exceeded"), {"Retry-After": "7"})
    with pytest.raises(RateLimited) as caught:
        ask(fake)
    assert caught.value.retry_after == 7
    assert caught.value.retryable
    assert len(fake.requests) == 1  # the SDK did not retry on its own


def test_429_retry_after_http_date(fake: FakeServer) -> None:
    fake.answer = Canned(
        429, error_body("slow down"), {"Retry-After": formatdate(time.time() + 30, usegmt=True)}
    )
    with pytest.raises(RateLimited) as caught:
        ask(fake)
    assert 25 <= caught.value.retry_after <= 31


def test_429_without_retry_after(fake: FakeServer) -> None:
    fake.answer = Canned(429, error_body("slow down"))
    with pytest.raises(RateLimited) as caught:
        ask(fake)
    assert caught.value.retry_after is None


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_server_error(fake: FakeServer, status: int) -> None:
    fake.answer = Canned(status, error_body("boom", type_="server_error"))
    with pytest.raises(ServerError):
        ask(fake)
    assert len(fake.requests) == 1


def test_connection_refused_is_server_error() -> None:
    client = OpenAICompatClient("http://127.0.0.1:9/v1", API_KEY, "m", timeout_s=2)
    with pytest.raises(ServerError):
        client.complete(messages=[{"role": "user", "content": "x"}], tools=[])


def test_slow_server_is_timeout(fake: FakeServer) -> None:
    fake.answer = Canned(body=completion({"content": "late"}), delay_s=1.5)
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        ask(fake, timeout_s=0.5)
    assert time.monotonic() - started < 1.4


@pytest.mark.parametrize(
    "body",
    [
        error_body(
            "This model's maximum context length is 8192 tokens.", "context_length_exceeded"
        ),
        error_body("Requested tokens (9000) exceed context window of 2048"),
        error_body("the request exceeds the available context size, try increasing it"),
        error_body("Input is too long for requested model."),
        "prompt is too long: 210000 tokens > 200000 maximum",
    ],
)
def test_400_context_length_is_overflow(fake: FakeServer, body: Any) -> None:
    fake.answer = Canned(400, body)
    with pytest.raises(ContextOverflow):
        ask(fake)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, error_body("Invalid value for 'temperature'", "invalid_value")),
        (404, error_body("The model `nope` does not exist", "model_not_found")),
        (422, {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}),
    ],
)
def test_other_4xx_is_invalid_request(fake: FakeServer, status: int, body: Any) -> None:
    fake.answer = Canned(status, body)
    with pytest.raises(InvalidRequest) as caught:
        ask(fake)
    assert not caught.value.retryable


@pytest.mark.parametrize("status", [401, 403])
def test_401_403_is_auth_error(fake: FakeServer, status: int) -> None:
    fake.answer = Canned(
        status, error_body(f"Incorrect API key provided: {API_KEY}", "invalid_api_key")
    )
    with pytest.raises(AuthError) as caught:
        ask(fake)
    assert str(caught.value) == f"auth_error: HTTP {status} (invalid_api_key)"


@pytest.mark.parametrize(
    ("status", "headers"),
    [(400, {}), (401, {}), (403, {}), (404, {}), (429, {"Retry-After": "1"}), (500, {})],
)
def test_messages_never_leak_key_url_or_body(fake: FakeServer, status: int, headers: dict) -> None:
    leaky = f"key {API_KEY} at {fake.base_url} said BODY-SECRET"
    fake.answer = Canned(status, error_body(leaky, "context_length_exceeded"), headers)
    with pytest.raises(Exception) as caught:
        ask(fake)
    for text in (str(caught.value), repr(caught.value)):
        assert API_KEY not in text and "127.0.0.1" not in text and "BODY-SECRET" not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_from_settings_requires_base_url_and_model(settings: Any) -> None:
    settings.AGENTOPS_MODEL_BASE_URL = ""
    settings.AGENTOPS_MODEL_NAME = ""
    with pytest.raises(ConfigError, match="AGENTOPS_MODEL_BASE_URL and AGENTOPS_MODEL_NAME"):
        openai_from_settings()


def test_from_settings_builds_a_working_client(settings: Any, fake: FakeServer) -> None:
    settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
    settings.AGENTOPS_MODEL_API_KEY = API_KEY
    settings.AGENTOPS_MODEL_NAME = "fake-model"
    fake.answer = Canned(body=completion({"content": "hi"}))
    reply = openai_from_settings().complete(
        messages=[{"role": "user", "content": "x"}], tools=[]
    )
    assert reply.text == "hi"
    assert fake.requests[0]["json"]["model"] == "fake-model"


def test_the_body_goes_out_as_given(fake: FakeServer) -> None:
    """The client posts its JSON body itself (no SDK transform): every message field, tool
    schema and choice arrives unchanged, with the key as a bearer token."""
    fake.answer = Canned(body=completion({"content": "ok"}))
    messages = [{"role": "system", "content": "Be brief. é ✓"},
                {"role": "user", "content": "weather?", "name": "ana"},
                {"role": "assistant", "content": None, "tool_calls": [tool_call('{"city": "Lyon"}')]},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}]
    fake.client().complete(messages=messages, tools=TOOLS, tool_choice="get_weather",
                           max_tokens=7)
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == f"Bearer {API_KEY}"
    assert sent["json"] == {"model": "fake-model", "messages": messages, "tools": TOOLS,
                            "tool_choice": {"type": "function",
                                            "function": {"name": "get_weather"}},
                            "max_tokens": 7}


def test_a_kept_alive_pool_reuses_its_connection(fake: FakeServer) -> None:
    """A client with a keep-alive pool sends one call after another on one TCP connection."""
    fake.answer = Canned(body=completion({"content": "ok"}))
    client = OpenAICompatClient(fake.base_url, API_KEY, "fake-model", timeout_s=5, keep_alive=4)
    for _ in range(3):
        client.complete(messages=[{"role": "user", "content": "x"}], tools=[])
    assert len({r["peer"] for r in fake.requests}) == 1, [r["peer"] for r in fake.requests]


def test_calls_in_flight_each_get_a_connection_and_keep_alive_bounds_the_idle_ones(
        fake: FakeServer) -> None:
    """Six calls at once go out on six connections (none waits for another's); afterwards
    at most ``keep_alive`` of them stay open and later calls reuse those."""
    fake.answer = Canned(body=completion({"content": "ok"}), delay_s=0.3)
    client = OpenAICompatClient(fake.base_url, API_KEY, "fake-model", timeout_s=5, keep_alive=2)
    ask_once = lambda: client.complete(messages=[{"role": "user", "content": "x"}], tools=[])  # noqa: E731
    threads = [threading.Thread(target=ask_once) for _ in range(6)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - started < 1.2  # at once, not one after another (6 x 0.3 s)
    at_once = {r["peer"] for r in fake.requests}
    assert len(at_once) == 6
    fake.requests.clear()
    fake.answer = Canned(body=completion({"content": "ok"}))
    for _ in range(4):
        ask_once()
    later = {r["peer"] for r in fake.requests}
    assert len(later) == 1 and later <= at_once  # a kept connection, not a new one
