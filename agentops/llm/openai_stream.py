"""Streamed OpenAI-compatible calls, through the official ``openai`` SDK (its event-stream parser).

Imported by the first streamed call (agentops.llm.openai_compat), not before: importing the
SDK (with its HTTP library and pydantic models) costs a process tens of MB, which a worker
whose calls are all plain never needs.
"""
from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from agentops.llm.openai_wire import arguments_parse, overflow
from agentops.llm.protocol import ModelError, ModelReply, TextSink, ToolCallRequest, Usage
from agentops.llm.provider_errors import (
    cut_stream,
    garbled_stream,
    safe_code,
    status_error,
    transport_error,
)

# What ``chat.completions.create`` passes besides the body: the API key as a bearer token.
_REQUEST_OPTIONS: dict[str, Any] = {"security": {"bearer_auth": True}}
# A stream is a reply only once it ended as the protocol says (a finish_reason or [DONE]);
# bytes that are not UTF-8 or events that are not JSON are the provider's fault, not ours.
_GARBLED = (UnicodeDecodeError, json.JSONDecodeError)


class _Chunks(openai.Stream[ChatCompletionChunk]):
    """The SDK's chunk stream, noting whether the server sent its ``[DONE]`` end marker."""

    done = False

    def _iter_events(self) -> Any:
        for sse in super()._iter_events():
            if sse.data.startswith("[DONE]"):
                self.done = True
            yield sse


def sdk_client(*, base_url: str, api_key: str, timeout_s: float) -> openai.OpenAI:
    """Return the SDK's client for streamed calls (the engine owns retries: none here)."""
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0,
                         http_client=openai.DefaultHttpxClient(timeout=timeout_s))


def sdk_http_class() -> type:
    """Return the SDK's default HTTP client class (plain calls through a proxy use it)."""
    return openai.DefaultHttpxClient


def stream_complete(sdk: openai.OpenAI, params: dict[str, Any], sink: TextSink, *,
                    model: str) -> ModelReply:
    """Send one streamed request and return its reply; raise a ModelError for a failure."""
    try:
        chunks = sdk.post("/chat/completions", cast_to=ChatCompletion,
                          body={**params, "stream": True,
                                "stream_options": {"include_usage": True}},
                          options=_REQUEST_OPTIONS, stream=True, stream_cls=_Chunks)
        return _streamed(chunks, sink, model=model)
    except openai.APIError as exc:
        raise _model_error(exc) from None
    except _GARBLED as exc:
        raise garbled_stream(exc) from None


def _streamed(chunks: Any, sink: TextSink, *, model: str) -> ModelReply:
    """Assemble a ModelReply from streamed chunks, passing text pieces to ``sink``."""
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish, usage, name = "", None, model
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        name = getattr(chunk, "model", None) or name
        for choice in getattr(chunk, "choices", None) or ():
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                sink(delta.content)
            if delta is not None and getattr(delta, "refusal", None):
                refusal.append(delta.refusal)
            for part in (delta.tool_calls or ()) if delta is not None else ():
                slot = calls.setdefault(part.index or 0, {"id": "", "name": "", "arguments": ""})
                slot["id"] = part.id or slot["id"]
                if part.function is not None:
                    slot["name"] += part.function.name or ""
                    slot["arguments"] += part.function.arguments or ""
            finish = choice.finish_reason or finish
    if not finish and not getattr(chunks, "done", False):
        raise cut_stream("no finish_reason and no [DONE]", text)
    finish = finish or "stop"
    cut_off = finish == "length"
    return ModelReply(
        text="".join(text),
        tool_calls=tuple(ToolCallRequest(name=c["name"], raw_arguments=c["arguments"],
                                         arguments=arguments_parse(c["arguments"], cut_off=cut_off),
                                         provider_id=c["id"]) for _, c in sorted(calls.items())),
        usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                    completion_tokens=getattr(usage, "completion_tokens", 0) or 0),
        finish_reason="refusal" if refusal and finish == "stop" else finish, model=name,
        refusal="".join(refusal))


def _model_error(exc: openai.APIError) -> ModelError:
    """Map an SDK error (a streamed call) to a ModelError: a short, secret-free summary."""
    if isinstance(exc, openai.APIConnectionError):
        return transport_error(timed_out=isinstance(exc, openai.APITimeoutError))
    status = getattr(exc, "status_code", None)
    code = safe_code(exc.code)
    return status_error(status, code, response=getattr(exc, "response", None),
                        overflow=overflow(status, code, exc.message, exc.body))
