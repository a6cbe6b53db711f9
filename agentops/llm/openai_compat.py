"""A ModelClient for any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM).

A plain (non-streamed) call is a POST of the JSON body on an HTTP lane
(agentops.llm.http_lanes) and a JSON answer: it needs no SDK, and a process whose calls are
all plain never imports one. Importing the ``openai`` SDK (its HTTP library and pydantic
models) grows a worker process by tens of MB; in a worker host that import happened at the
first model call, once per q2 process. Streamed calls, and plain calls through a proxy, go
through the SDK (agentops.llm.openai_stream), imported by the first of them.
"""

from __future__ import annotations

import json
import os
import threading
from types import ModuleType
from json.encoder import encode_basestring_ascii as _STRING_JSON
from typing import Any

from agentops.llm.http_lanes import model_lanes
from agentops.llm.openai_wire import overflow, tool_call_read, wire_tool_choice
from agentops.llm.protocol import (
    ModelError,
    ModelOptions,
    ModelReply,
    ServerError,
    TextSink,
    Usage,
    messages_json,
    json_text,
)
from agentops.llm.provider_errors import safe_code, status_error
from agentops.llm.repair import complete_with_repair

# Keyless local servers ignore the header; the SDK refuses to build without a key.
_NO_KEY = "no-key"
# Idle keep-alive connections are dropped after this, as the SDK's HTTP client does.
_KEEPALIVE_EXPIRY_S = 5.0
# The keys of a request body (complete()), as json.dumps writes them.
_KEYS = {key: json.dumps(key) for key in ("model", "tools", "tool_choice", "max_tokens",
                                           "messages")}


def request_headers(api_key: str, env: Any = os.environ) -> dict[str, str]:
    """Return the headers of every plain call: JSON both ways, gzip or deflate answers
    accepted, the key as a bearer token, and the organization and project the SDK would
    read from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``. Not the SDK's identity headers
    (``x-stainless-*``, its user agent): this is not the SDK speaking."""
    headers = {"accept": "application/json", "content-type": "application/json",
               "accept-encoding": "gzip, deflate", "connection": "keep-alive",
               "user-agent": "AgentOps/Python", "authorization": f"Bearer {api_key or _NO_KEY}"}
    for name, var in (("openai-organization", "OPENAI_ORG_ID"),
                      ("openai-project", "OPENAI_PROJECT_ID")):
        if env.get(var):
            headers[name] = env[var]
    return headers


def _sdk_side() -> ModuleType:
    """Return agentops.llm.openai_stream: the SDK is imported with it, on its first use."""
    from agentops.llm import openai_stream

    return openai_stream


def _sdk_http_class() -> type:
    """Return the SDK's HTTP client class (a plain call through a proxy goes out on it)."""
    return _sdk_side().sdk_http_class()


class OpenAICompatClient:
    """Answer chat turns on an OpenAI-compatible endpoint, mapping failures to ModelErrors."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 60,
        context_window: int = 8192,
        options: ModelOptions | None = None,
        keep_alive: int | None = None,
    ) -> None:
        """``keep_alive``: idle connections kept open (None: one); a worker process with N
        runs in flight shares one client and wants N."""
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        self._base_url = base_url
        self._api_key = api_key or _NO_KEY
        self._sdk: Any = None  # the SDK's client, built by the first streamed call
        self._sdk_lock = threading.Lock()
        # The engine owns retries (with its budget and policy): a plain call is tried once.
        self._lanes = model_lanes(_sdk_http_class, f"{base_url.rstrip('/')}/chat/completions",
                                  request_headers(api_key), timeout_s=timeout_s,
                                  keep=keep_alive or 1, keepalive_expiry=_KEEPALIVE_EXPIRY_S)

    def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ModelReply:
        """Return the model's reply to ``messages`` or raise a ModelError subclass."""
        params: dict[str, Any] = {"model": self.model}
        if tools:
            # Providers reject tool_choice without tools, so both travel together.
            params["tools"] = tools
            if tool_choice is not None:
                params["tool_choice"] = wire_tool_choice(tool_choice)
        if (max_tokens or self.options.max_tokens) is not None:
            params["max_tokens"] = max_tokens or self.options.max_tokens
        sink = on_text if self.options.stream else None
        return complete_with_repair(
            lambda msgs: self._once({**params, "messages": msgs}, sink), messages=messages,
            tools=tools, tool_choice=tool_choice, repair_turns=self.options.repair_turns)

    def _once(self, params: dict[str, Any], sink: TextSink | None) -> ModelReply:
        """Send one request (streamed when ``sink`` is given) and return its reply."""
        if sink is None:
            return self._reply(self._post(params))
        return _sdk_side().stream_complete(self._streaming_sdk(), params, sink, model=self.model)

    def _streaming_sdk(self) -> Any:
        """Return the SDK's client for streamed calls, built once (slot threads share it)."""
        with self._sdk_lock:
            if self._sdk is None:
                self._sdk = _sdk_side().sdk_client(base_url=self._base_url, api_key=self._api_key,
                                       timeout_s=self.timeout_s)
            return self._sdk

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions on a lane (agentops.llm.http_lanes) and return the decoded
        JSON.

        The SDK's request path (options, URL, header and body building, then a typed
        ChatCompletion) cost twice the CPU of the HTTP call itself, the most of any part of a
        step with hundreds of runs in flight; a failure maps as the SDK's would.
        """
        return self._lanes.post_json(_body_json(body).encode(), _response_error)

    def _reply(self, completion: Any) -> ModelReply:
        """Convert a decoded chat.completion into a ModelReply; a malformed one is a ServerError."""
        try:
            return self._reply_of(completion)
        except (AttributeError, IndexError, KeyError, TypeError):
            raise ServerError("server_error: malformed reply") from None

    def _reply_of(self, completion: dict[str, Any]) -> ModelReply:
        choices = completion.get("choices")
        if not choices:
            raise ServerError("server_error: reply has no choices")
        choice = choices[0]
        finish = choice.get("finish_reason") or "stop"
        message = choice.get("message") or {}
        raw_calls = list(message.get("tool_calls") or ())
        if not raw_calls and message.get("function_call") is not None:
            # legacy single function_call, still sent by some servers
            raw_calls = [{"function": message["function_call"]}]
        usage = completion.get("usage") or {}
        refusal = message.get("refusal") or ""
        return ModelReply(
            text=message.get("content") or "", refusal=refusal if isinstance(refusal, str) else "",
            tool_calls=tuple(tool_call_read(call, cut_off=finish == "length")
                             for call in raw_calls),
            usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                        completion_tokens=usage.get("completion_tokens") or 0),
            finish_reason="refusal" if refusal and finish == "stop" else finish,
            model=completion.get("model") or self.model,
        )


def _body_json(body: dict[str, Any]) -> str:
    """Return ``json.dumps(body)``, written a key at a time: a list (the tools, the messages)
    as agentops.llm.protocol's ``messages_json`` writes it, so the tool schemas and a recent
    turn's messages, SentMessages, are not encoded again at each call."""
    parts = []
    for key, value in body.items():
        name = _KEYS.get(key)
        if name is None:  # not a key complete() sends: json.dumps writes it all
            return json_text(body)
        kind = type(value)
        # json.dumps writes a lone string with encode_basestring_ascii itself
        text = (messages_json(value) if kind is list else _STRING_JSON(value) if kind is str
                else json_text(value))
        parts.append(f"{name}: {text}")
    return "{" + ", ".join(parts) + "}"


def _response_error(response: Any) -> ModelError:
    """Map an HTTP error answer to a ModelError, reading its body as the SDK does: the
    ``error`` object's ``code`` and ``message`` (the body itself when it has no ``error``)."""
    try:
        body: Any = json.loads(response.content)
    except ValueError:
        body = response.text
    error = body.get("error", body) if isinstance(body, dict) else body
    fields = error if isinstance(error, dict) else {}
    raw_code = fields.get("code")
    code = safe_code(str(raw_code) if raw_code is not None else None)
    message = fields.get("message") if isinstance(fields.get("message"), str) else ""
    return status_error(response.status_code, code, response=response,
                        overflow=overflow(response.status_code, code, message, error))
