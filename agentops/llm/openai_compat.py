"""A ModelClient for any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM)."""

from __future__ import annotations

import json
import math
import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from agentops.llm.protocol import (
    AuthError,
    ContextOverflow,
    InvalidRequest,
    ModelError,
    ModelOptions,
    ModelReply,
    ModelTimeout,
    RateLimited,
    ServerError,
    TextSink,
    ToolCallRequest,
    Usage,
)
from agentops.llm.repair import complete_with_repair

# Providers word "prompt too long" differently; the failure policy must still see one category.
_CONTEXT_HINT = re.compile(
    r"context[_ ]length|context window|maximum context|n_ctx|too many tokens|prompt is too long"
    r"|input is too long|exceed\w*\W+(?:\w+\W+){0,4}?(?:context|tokens?|window)\b",
    re.IGNORECASE,
)
_SAFE_CODE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# The SDK refuses to build without a key; keyless local servers ignore the header anyway.
_NO_KEY = "no-key"


class OpenAICompatClient:
    """Answer chat turns through the official ``openai`` SDK, mapping failures to ModelErrors."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 60,
        context_window: int = 8192,
        options: ModelOptions | None = None,
    ) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        # The engine owns retries (with its budget and policy); SDK retries would hide them.
        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key or _NO_KEY, timeout=timeout_s, max_retries=0
        )

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
                params["tool_choice"] = _tool_choice(tool_choice)
        if (max_tokens or self.options.max_tokens) is not None:
            params["max_tokens"] = max_tokens or self.options.max_tokens
        sink = on_text if self.options.stream else None
        return complete_with_repair(
            lambda msgs: self._once({**params, "messages": msgs}, sink), messages=messages,
            tools=tools, tool_choice=tool_choice, repair_turns=self.options.repair_turns)

    def _once(self, params: dict[str, Any], sink: TextSink | None) -> ModelReply:
        """Send one request (streamed when ``sink`` is given) and return its reply."""
        try:
            if sink is None:
                return self._reply(self._sdk.chat.completions.create(**params))
            chunks = self._sdk.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True})
            return _streamed(chunks, sink, model=self.model)
        except openai.APIError as exc:
            raise _model_error(exc) from None

    def _reply(self, completion: Any) -> ModelReply:
        """Convert an SDK ChatCompletion into a ModelReply."""
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ServerError("server_error: reply has no choices")
        choice = choices[0]
        finish = choice.finish_reason or "stop"
        message = choice.message
        raw_calls = list(message.tool_calls or ())
        if not raw_calls and getattr(message, "function_call", None) is not None:
            raw_calls = [message]  # legacy single function_call, still sent by some servers
        usage = completion.usage
        return ModelReply(
            text=message.content or "",
            tool_calls=tuple(_tool_call(call, cut_off=finish == "length") for call in raw_calls),
            usage=Usage(
                prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
                completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            ),
            finish_reason=finish,
            model=getattr(completion, "model", None) or self.model,
        )


def _streamed(chunks: Any, sink: TextSink, *, model: str) -> ModelReply:
    """Assemble a ModelReply from streamed chunks, passing text pieces to ``sink``."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish, usage, name = "stop", None, model
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        name = getattr(chunk, "model", None) or name
        for choice in getattr(chunk, "choices", None) or ():
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                sink(delta.content)
            for part in (delta.tool_calls or ()) if delta is not None else ():
                slot = calls.setdefault(part.index or 0, {"id": "", "name": "", "arguments": ""})
                slot["id"] = part.id or slot["id"]
                if part.function is not None:
                    slot["name"] += part.function.name or ""
                    slot["arguments"] += part.function.arguments or ""
            finish = choice.finish_reason or finish
    cut_off = finish == "length"
    return ModelReply(
        text="".join(text),
        tool_calls=tuple(ToolCallRequest(name=c["name"], raw_arguments=c["arguments"],
                                         arguments=_parse_arguments(c["arguments"], cut_off=cut_off),
                                         provider_id=c["id"]) for _, c in sorted(calls.items())),
        usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                    completion_tokens=getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=finish, model=name)


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Return the wire form of a tool choice; a bare name forces that function."""
    if isinstance(choice, dict) or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _tool_call(call: Any, *, cut_off: bool) -> ToolCallRequest:
    """Convert one SDK tool call; unparsable or non-object arguments become None."""
    fn = getattr(call, "function", None) or getattr(call, "function_call", None)
    raw = getattr(fn, "arguments", None) or ""
    if isinstance(raw, dict):  # non-conforming servers send the object itself
        raw = json.dumps(raw)
    return ToolCallRequest(
        name=getattr(fn, "name", "") or "",
        arguments=_parse_arguments(raw, cut_off=cut_off),
        raw_arguments=raw,
        provider_id=getattr(call, "id", "") or "",
    )


def _parse_arguments(raw: str, *, cut_off: bool) -> dict[str, Any] | None:
    """Return the JSON object in ``raw``, or None when it is not one."""
    if not raw.strip():
        # Some servers send "" for a tool without parameters; a cut-off reply sent nothing usable.
        return None if cut_off else {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _model_error(exc: openai.APIError) -> ModelError:
    """Map an SDK error to a ModelError whose message is a short, secret-free summary."""
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout("timeout: no answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return ServerError("server_error: connection failed")
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or status < 400:
        return ServerError("server_error: malformed response")
    code = exc.code if exc.code and _SAFE_CODE.match(exc.code) else ""
    error = _status_error(status, code, exc)
    error.status_code = status  # type: ignore[attr-defined]
    error.provider_code = code  # type: ignore[attr-defined]
    return error


def _status_error(status: int, code: str, exc: openai.APIError) -> ModelError:
    """Pick the ModelError class for an HTTP error status."""
    suffix = f" ({code})" if code else ""
    if status == 429:
        retry_after = _retry_after(getattr(exc, "response", None))
        return RateLimited(f"rate_limited: HTTP 429{suffix}", retry_after=retry_after)
    if status == 408:
        return ModelTimeout(f"timeout: HTTP 408{suffix}")
    if status >= 500 or status == 409:
        return ServerError(f"server_error: HTTP {status}{suffix}")
    if status in (401, 403):
        return AuthError(f"auth_error: HTTP {status}{suffix}")
    if status in (400, 413, 422) and _mentions_context(code, exc):
        return ContextOverflow(f"context_overflow: HTTP {status}{suffix}")
    return InvalidRequest(f"invalid_request: HTTP {status}{suffix}")


def _mentions_context(code: str, exc: openai.APIError) -> bool:
    """Tell whether a 4xx says the prompt does not fit the model's window."""
    if code == "context_length_exceeded" or getattr(exc, "status_code", 0) == 413:
        return True
    body = exc.body if isinstance(exc.body, (str, dict)) else ""
    text = json.dumps(body) if isinstance(body, dict) else body
    return bool(_CONTEXT_HINT.search(f"{exc.message} {text}"))


def _retry_after(response: Any) -> float | None:
    """Return the seconds a 429 asks us to wait (Retry-After as seconds or HTTP-date)."""
    headers = getattr(response, "headers", None) or {}
    millis = headers.get("retry-after-ms")
    value = headers.get("retry-after")
    try:
        seconds = float(millis) / 1000 if millis is not None else float(value or "")
    except ValueError:
        seconds = _seconds_until(value) if value else math.nan
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _seconds_until(http_date: str) -> float:
    """Return the seconds from now until an HTTP-date, or NaN when it is not one."""
    try:
        return parsedate_to_datetime(http_date).timestamp() - time.time()
    except (TypeError, ValueError):
        return math.nan
