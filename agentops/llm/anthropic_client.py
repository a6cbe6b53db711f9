"""A ModelClient for Anthropic's Messages API (tool use), through the official ``anthropic`` SDK.

The engine speaks OpenAI-style messages; this client translates them: system messages become
``system``, an assistant's ``tool_calls`` become ``tool_use`` blocks, and consecutive tool
messages become one user turn of ``tool_result`` blocks, each paired by its ``tool_use_id``.
"""
from __future__ import annotations

import json
from typing import Any

import anthropic

from agentops.llm.protocol import ModelError, ModelOptions, ModelReply, TextSink, ToolCallRequest, Usage
from agentops.llm.provider_errors import mentions_context, safe_code, status_error, transport_error
from agentops.llm.repair import complete_with_repair

# The Messages API requires max_tokens on every request.
DEFAULT_MAX_TOKENS = 1024
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
           "max_tokens": "length", "refusal": "content_filter"}


class AnthropicClient:
    """Answer chat turns with Claude through the Messages API, mapping failures to ModelErrors."""

    def __init__(self, *, api_key: str, model: str, base_url: str | None = None,
                 timeout_s: float = 60, context_window: int = 200_000,
                 options: ModelOptions | None = None) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.context_window = context_window
        self.options = options or ModelOptions()
        # The engine owns retries (with its budget and policy); SDK retries would hide them.
        self._sdk = anthropic.Anthropic(api_key=api_key or "no-key", base_url=base_url,
                                        timeout=timeout_s, max_retries=0)

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
        try:
            if sink is None:
                return _reply(self._sdk.messages.create(**params))
            with self._sdk.messages.stream(**params) as stream:
                for piece in stream.text_stream:
                    sink(piece)
                return _reply(stream.get_final_message())
        except anthropic.APIError as exc:
            raise _model_error(exc) from None


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
    """Convert an SDK Message into a ModelReply."""
    text, calls = [], []
    for block in message.content or ():
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else None
            calls.append(ToolCallRequest(name=block.name, arguments=args,
                                         raw_arguments=json.dumps(block.input), provider_id=block.id))
    usage = message.usage
    return ModelReply(
        text="".join(text), tool_calls=tuple(calls),
        usage=Usage(prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
                    completion_tokens=getattr(usage, "output_tokens", 0) or 0),
        finish_reason=_FINISH.get(message.stop_reason or "end_turn", "stop"),
        model=message.model or "")


def _model_error(exc: anthropic.APIError) -> ModelError:
    """Map an SDK error to a ModelError whose message is a short, secret-free summary."""
    if isinstance(exc, anthropic.APIConnectionError):
        return transport_error(timed_out=isinstance(exc, anthropic.APITimeoutError))
    status = getattr(exc, "status_code", None)
    body = exc.body if isinstance(exc.body, dict) else {}
    code = safe_code((body.get("error") or {}).get("type"))
    # Anthropic says "prompt is too long" in a 400; 413 is its request_too_large.
    overflow = status == 413 or (status == 400 and mentions_context(exc.message, exc.body))
    return status_error(status, code, response=getattr(exc, "response", None), overflow=overflow)
