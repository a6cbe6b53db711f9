"""A ModelClient for any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM)."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from agentops.llm.protocol import (
    ModelError,
    ModelOptions,
    ModelReply,
    ServerError,
    TextSink,
    ToolCallRequest,
    Usage,
)
from agentops.llm.provider_errors import mentions_context, safe_code, status_error, transport_error
from agentops.llm.repair import complete_with_repair

# The SDK refuses to build without a key; keyless local servers ignore the header anyway.
_NO_KEY = "no-key"
# What ``chat.completions.create`` passes besides the body: the API key as a bearer token.
_REQUEST_OPTIONS: dict[str, Any] = {"security": {"bearer_auth": True}}
_STREAM_CLS = openai.Stream[ChatCompletionChunk]


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
        keep_alive: int | None = None,
    ) -> None:
        """``keep_alive``: idle connections the HTTP pool keeps open (None: the SDK's 100);
        a worker process with N runs in flight shares one client and wants N."""
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        # The engine owns retries (with its budget and policy); SDK retries would hide them.
        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key or _NO_KEY, timeout=timeout_s, max_retries=0,
            http_client=_http_client(timeout_s, keep_alive) if keep_alive else None,
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
                return self._reply(self._post(params, stream=False))
            chunks = self._post({**params, "stream": True,
                                 "stream_options": {"include_usage": True}}, stream=True)
            return _streamed(chunks, sink, model=self.model)
        except openai.APIError as exc:
            raise _model_error(exc) from None

    def _post(self, body: dict[str, Any], *, stream: bool) -> Any:
        """POST /chat/completions through the SDK's request path (auth, timeout, errors,
        response parsing), as ``chat.completions.create`` does, but without its
        ``maybe_transform`` of the body: a walk of the typed-dict annotations of every
        message that cost more CPU than the rest of a step. The body is already plain JSON."""
        return self._sdk.post("/chat/completions", body=body, cast_to=ChatCompletion,
                              options=_REQUEST_OPTIONS, stream=stream, stream_cls=_STREAM_CLS)

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


def _http_client(timeout_s: float, keep_alive: int) -> Any:
    """Return the SDK's HTTP client whose pool keeps ``keep_alive`` idle connections.

    The limits are built with the type of the SDK's own defaults, so this follows whichever
    HTTP library the SDK ships with.
    """
    defaults = openai.DEFAULT_CONNECTION_LIMITS
    limits = type(defaults)(max_connections=max(keep_alive, defaults.max_connections or 0),
                            max_keepalive_connections=keep_alive,
                            keepalive_expiry=defaults.keepalive_expiry)
    return openai.DefaultHttpxClient(timeout=timeout_s, limits=limits)


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
    if isinstance(exc, openai.APIConnectionError):
        return transport_error(timed_out=isinstance(exc, openai.APITimeoutError))
    status = getattr(exc, "status_code", None)
    code = safe_code(exc.code)
    return status_error(status, code, response=getattr(exc, "response", None),
                        overflow=_overflow(status, code, exc))


def _overflow(status: object, code: str, exc: openai.APIError) -> bool:
    """Tell whether a 4xx says the prompt does not fit the model's window."""
    if status == 413:
        return True
    if status not in (400, 422):
        return False
    return code == "context_length_exceeded" or mentions_context(exc.message, exc.body)
