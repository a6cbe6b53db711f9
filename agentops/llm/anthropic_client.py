"""A ModelClient for Anthropic's Messages API (tool use), on the official ``anthropic`` SDK.

The engine speaks OpenAI-style messages; this client translates them: system messages become
``system``, an assistant's ``tool_calls`` become ``tool_use`` blocks, and consecutive tool
messages become one user turn of ``tool_result`` blocks, each paired by its ``tool_use_id``.

A plain call posts its JSON on the SDK's own HTTP client with the headers the SDK would send;
a streamed call goes through the SDK (its event-stream parser and message accumulator).
"""
from __future__ import annotations

import json
from typing import Any

import anthropic

from agentops.llm.protocol import (
    ModelError,
    ModelOptions,
    ModelReply,
    ServerError,
    TextSink,
    ToolCallRequest,
    Usage,
)
from agentops.llm.http_lanes import http_library, merged_headers, model_lanes
from agentops.llm.provider_errors import (
    cut_stream,
    garbled_stream,
    mentions_context,
    safe_code,
    status_error,
    transport_error,
)
from agentops.llm.repair import complete_with_repair

# The Messages API requires max_tokens on every request.
DEFAULT_MAX_TOKENS = 1024
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
           "max_tokens": "length", "refusal": "refusal"}
# The SDK's body encoding (compact, UTF-8, no NaN), so a plain call sends the SDK's bytes.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class AnthropicClient:
    """Answer chat turns with Claude through the Messages API, mapping failures to ModelErrors."""

    def __init__(self, *, api_key: str, model: str, base_url: str | None = None,
                 timeout_s: float = 60, context_window: int = 200_000,
                 options: ModelOptions | None = None, keep_alive: int | None = None) -> None:
        """``keep_alive``: idle connections kept open (None: one); a worker process with N
        runs in flight shares one client and wants N."""
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        self._http = anthropic.DefaultHttpxClient(timeout=timeout_s)
        # The engine owns retries (with its budget and policy); SDK retries would hide them.
        self._sdk = anthropic.Anthropic(api_key=api_key or "no-key", base_url=base_url,
                                        timeout=timeout_s, max_retries=0, http_client=self._http)
        # The SDK's own client serves streamed calls; plain calls go out on lanes.
        self._lib = http_library(anthropic.DefaultHttpxClient)
        # What the SDK sends with every request (the HTTP client's own headers, then the SDK's
        # identity headers, anthropic-version, the key as it words it, the retry count and read
        # timeout), built once: a plain call is then the body, one send and one JSON parse.
        headers = merged_headers(self._http.headers, {
            "x-stainless-retry-count": "0", "x-stainless-read-timeout": str(timeout_s)},
            self._sdk.default_headers)
        self._lanes = model_lanes(lambda: anthropic.DefaultHttpxClient,
                                  f"{str(self._sdk.base_url).rstrip('/')}/v1/messages", headers,
                                  timeout_s=timeout_s, keep=keep_alive or 1,
                                  keepalive_expiry=_keepalive_expiry())

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 tool_choice: str | dict[str, Any] | None = None, max_tokens: int | None = None,
                 on_text: TextSink | None = None) -> ModelReply:
        """Return Claude's reply to ``messages`` or raise a ModelError subclass."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.options.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if tools:
            params["tools"] = [_tool(t) for t in tools]
            if tool_choice is not None:
                params["tool_choice"] = _tool_choice(tool_choice)
        sink = on_text if self.options.stream else None
        return complete_with_repair(
            lambda msgs: self._once({**params, **_messages(msgs)}, sink), messages=messages,
            tools=tools, tool_choice=tool_choice, repair_turns=self.options.repair_turns)

    def _once(self, params: dict[str, Any], sink: TextSink | None) -> ModelReply:
        """Send one request (streamed when ``sink`` is given) and return its reply."""
        if sink is None:
            return _reply(self._post(params))
        try:
            with self._sdk.messages.stream(**params) as stream:
                return _reply(self._streamed(stream, sink))
        except anthropic.APIError as exc:
            raise _model_error(exc) from None
        except self._lib.TimeoutException:
            raise transport_error(timed_out=True) from None
        except self._lib.HTTPError:  # the SDK passes a connection lost mid-stream through
            raise transport_error(timed_out=False) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise garbled_stream(exc) from None

    @staticmethod
    def _streamed(stream: Any, sink: TextSink) -> dict[str, Any]:
        """Pass the stream's text to ``sink``; return the message once ``message_stop`` came.

        A stream that ends before ``message_stop`` (the connection closed) is a fragment,
        never a reply: the SDK would hand back what it accumulated as if complete.
        """
        text: list[str] = []
        for event in stream:
            if event.type == "text":
                text.append(event.text)
                sink(event.text)
            elif event.type == "message_stop":
                return stream.get_final_message().to_dict(exclude_unset=False)
        raise cut_stream("no message_stop", text)

    def _post(self, body: dict[str, Any]) -> Any:
        """POST /v1/messages on a lane (agentops.llm.http_lanes) and return the decoded JSON.

        The request carries what the SDK's would (its headers, the key, its timeout) and a
        failure maps as the SDK's would; but the SDK's request path (options, URL, header and
        body building, then a typed Message) doubled the CPU of a call, the most of any part
        of a step with hundreds of runs in flight. Streamed calls still go through the SDK.
        """
        return self._lanes.post_json(_ENCODER.encode(body).encode(), _response_error)


def _keepalive_expiry() -> float | None:
    """Return how long the SDK's own pool keeps an idle connection."""
    limits = getattr(anthropic, "DEFAULT_CONNECTION_LIMITS", None)
    return getattr(limits, "keepalive_expiry", 5.0)


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an OpenAI function schema as an Anthropic tool."""
    fn = schema["function"]
    out = {"name": fn["name"], "description": fn.get("description") or "",
           "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("strict"):
        out["strict"] = True
    return out


def _tool_choice(choice: str | dict[str, Any]) -> dict[str, Any]:
    """Return the Messages API form of a tool choice; a bare name forces that tool."""
    if isinstance(choice, dict):
        return choice
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _messages(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Return ``system`` and ``messages`` in the Messages API form."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        blocks = _blocks(m)
        turn = "assistant" if role == "assistant" else "user"
        if out and out[-1]["role"] == turn:
            out[-1]["content"].extend(blocks)  # the API wants user/assistant to alternate
        else:
            out.append({"role": turn, "content": blocks})
    params: dict[str, Any] = {"messages": out}
    if system:
        params["system"] = "\n\n".join(system)
    return params


def _blocks(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the content blocks of one OpenAI-style message."""
    if m.get("role") == "tool":
        return [{"type": "tool_result", "tool_use_id": m.get("tool_call_id") or "",
                 "content": str(m.get("content") or "")}]
    blocks: list[dict[str, Any]] = []
    if m.get("content"):
        blocks.append({"type": "text", "text": str(m["content"])})
    for call in m.get("tool_calls") or ():
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {}
        blocks.append({"type": "tool_use", "id": call.get("id") or "", "name": fn.get("name", ""),
                       "input": args if isinstance(args, dict) else {}})
    return blocks or [{"type": "text", "text": "(empty)"}]


def _reply(message: Any) -> ModelReply:
    """Convert a decoded Messages API message into a ModelReply; a malformed one is a ServerError."""
    try:
        return _reply_of(message)
    except (AttributeError, KeyError, TypeError):
        raise ServerError("server_error: malformed reply") from None


def _reply_of(message: dict[str, Any]) -> ModelReply:
    text, calls = [], []
    for block in message.get("content") or ():
        if block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            raw = block.get("input")
            calls.append(ToolCallRequest(name=block.get("name") or "",
                                         arguments=raw if isinstance(raw, dict) else None,
                                         raw_arguments=json.dumps(raw),
                                         provider_id=block.get("id") or ""))
    usage = message.get("usage") or {}
    return ModelReply(
        text="".join(text), tool_calls=tuple(calls),
        usage=Usage(prompt_tokens=usage.get("input_tokens") or 0,
                    completion_tokens=usage.get("output_tokens") or 0),
        finish_reason=_FINISH.get(message.get("stop_reason") or "end_turn", "stop"),
        model=message.get("model") or "")


def _model_error(exc: anthropic.APIError) -> ModelError:
    """Map an SDK error (a streamed call) to a ModelError: a short, secret-free summary."""
    if isinstance(exc, anthropic.APIConnectionError):
        return transport_error(timed_out=isinstance(exc, anthropic.APITimeoutError))
    status = getattr(exc, "status_code", None)
    return status_error(status, _error_type(exc.body), response=getattr(exc, "response", None),
                        overflow=_overflow(status, exc.message, exc.body))


def _response_error(response: Any) -> ModelError:
    """Map an HTTP error answer to a ModelError, reading its body and wording its message as
    the SDK's ``_make_status_error_from_response`` does (JSON, else the stripped text)."""
    text = response.text.strip()
    try:
        body: Any = json.loads(text)
        message = f"Error code: {response.status_code} - {body}"
    except ValueError:
        body, message = text, text or f"Error code: {response.status_code}"
    return status_error(response.status_code, _error_type(body), response=response,
                        overflow=_overflow(response.status_code, message, body))


def _error_type(body: object) -> str:
    """Return the vetted ``error.type`` of an Anthropic error body (e.g. overloaded_error), else ""."""
    error = body.get("error") if isinstance(body, dict) else None
    return safe_code(error.get("type") if isinstance(error, dict) else None)


def _overflow(status: object, message: str, body: object) -> bool:
    """Tell whether a 4xx says the prompt does not fit the model's window.

    Anthropic says "prompt is too long" in a 400; 413 is its request_too_large.
    """
    return status == 413 or (status == 400 and mentions_context(message, body))
