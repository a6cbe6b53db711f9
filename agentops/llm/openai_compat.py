"""A ModelClient for any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM)."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from agentops.llm.http_lanes import merged_headers, model_lanes
from agentops.llm.protocol import (
    ModelError,
    ModelOptions,
    ModelReply,
    ServerError,
    TextSink,
    ToolCallRequest,
    Usage,
)
from agentops.llm.provider_errors import (
    cut_stream,
    garbled_stream,
    mentions_context,
    safe_code,
    status_error,
    transport_error,
)
from agentops.llm.repair import complete_with_repair

# The SDK refuses to build without a key; keyless local servers ignore the header anyway.
_NO_KEY = "no-key"
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
        """``keep_alive``: idle connections kept open (None: one); a worker process with N
        runs in flight shares one client and wants N."""
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        # The engine owns retries (with its budget and policy); SDK retries would hide them.
        # The SDK's own client serves streamed calls; plain calls go out on lanes.
        http = openai.DefaultHttpxClient(timeout=timeout_s)
        self._sdk = openai.OpenAI(base_url=base_url, api_key=api_key or _NO_KEY,
                                  timeout=timeout_s, max_retries=0, http_client=http)
        # What the SDK sends with every request (the HTTP client's own headers, its identity
        # headers, the retry count and the key as a bearer token), built once: a plain call is
        # then the body, one send and one JSON parse.
        headers = merged_headers(http.headers, {"x-stainless-retry-count": "0"},
                                 self._sdk.default_headers,
                                 {"Authorization": f"Bearer {self._sdk.api_key}"})
        self._lanes = model_lanes(openai.DefaultHttpxClient,
                                  f"{str(self._sdk.base_url).rstrip('/')}/chat/completions",
                                  headers, timeout_s=timeout_s, keep=keep_alive or 1,
                                  keepalive_expiry=openai.DEFAULT_CONNECTION_LIMITS.keepalive_expiry)

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
        if sink is None:
            return self._reply(self._post(params))
        try:
            chunks = self._sdk.post("/chat/completions", cast_to=ChatCompletion,
                                    body={**params, "stream": True,
                                          "stream_options": {"include_usage": True}},
                                    options=_REQUEST_OPTIONS, stream=True, stream_cls=_Chunks)
            return _streamed(chunks, sink, model=self.model)
        except openai.APIError as exc:
            raise _model_error(exc) from None
        except _GARBLED as exc:
            raise garbled_stream(exc) from None

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions on a lane (agentops.llm.http_lanes) and return the decoded
        JSON.

        The request carries what the SDK's would (its headers, the key as a bearer token, its
        timeout) and a failure maps as the SDK's would; but the SDK's request path (options,
        URL, header and body building, then a typed ChatCompletion) cost twice the CPU of the
        HTTP call itself, the most of any part of a step with hundreds of runs in flight.
        Streamed calls still go through the SDK (its event-stream parser).
        """
        return self._lanes.post_json(json.dumps(body).encode(), _response_error)

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
            tool_calls=tuple(_tool_call(call, cut_off=finish == "length") for call in raw_calls),
            usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                        completion_tokens=usage.get("completion_tokens") or 0),
            finish_reason="refusal" if refusal and finish == "stop" else finish,
            model=completion.get("model") or self.model,
        )


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
                                         arguments=_parse_arguments(c["arguments"], cut_off=cut_off),
                                         provider_id=c["id"]) for _, c in sorted(calls.items())),
        usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                    completion_tokens=getattr(usage, "completion_tokens", 0) or 0),
        finish_reason="refusal" if refusal and finish == "stop" else finish, model=name,
        refusal="".join(refusal))


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Return the wire form of a tool choice; a bare name forces that function."""
    if isinstance(choice, dict) or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _tool_call(call: dict[str, Any], *, cut_off: bool) -> ToolCallRequest:
    """Convert one wire tool call; unparsable or non-object arguments become None."""
    fn = call.get("function") or {}
    raw = fn.get("arguments") or ""
    if not isinstance(raw, str):  # non-conforming servers send the object itself
        raw = json.dumps(raw)
    return ToolCallRequest(
        name=fn.get("name") or "",
        arguments=_parse_arguments(raw, cut_off=cut_off),
        raw_arguments=raw,
        provider_id=call.get("id") or "",
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
    """Map an SDK error (a streamed call) to a ModelError: a short, secret-free summary."""
    if isinstance(exc, openai.APIConnectionError):
        return transport_error(timed_out=isinstance(exc, openai.APITimeoutError))
    status = getattr(exc, "status_code", None)
    code = safe_code(exc.code)
    return status_error(status, code, response=getattr(exc, "response", None),
                        overflow=_overflow(status, code, exc.message, exc.body))


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
                        overflow=_overflow(response.status_code, code, message, error))


def _overflow(status: object, code: str, message: str, body: object) -> bool:
    """Tell whether a 4xx says the prompt does not fit the model's window."""
    if status == 413:
        return True
    if status not in (400, 422):
        return False
    return code == "context_length_exceeded" or mentions_context(message, body)
