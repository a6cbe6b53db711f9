"""The OpenAI chat-completions wire format: what a plain call and a streamed one share.

Tool choices and tool calls in their wire form, tool arguments parsed, and "the prompt does
not fit the window" told from an error answer. No SDK here: a worker process that only
makes plain calls never imports one (agentops.llm.openai_compat).
"""
from __future__ import annotations

import json
from typing import Any

from agentops.llm.protocol import ToolCallRequest
from agentops.llm.provider_errors import mentions_context


def wire_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Return the wire form of a tool choice; a bare name forces that function."""
    if isinstance(choice, dict) or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def tool_call_read(call: dict[str, Any], *, cut_off: bool) -> ToolCallRequest:
    """Convert one wire tool call; unparsable or non-object arguments become None."""
    fn = call.get("function") or {}
    raw = fn.get("arguments") or ""
    if not isinstance(raw, str):  # non-conforming servers send the object itself
        raw = json.dumps(raw)
    return ToolCallRequest(
        name=fn.get("name") or "",
        arguments=arguments_parse(raw, cut_off=cut_off),
        raw_arguments=raw,
        provider_id=call.get("id") or "",
    )


def arguments_parse(raw: str, *, cut_off: bool) -> dict[str, Any] | None:
    """Return the JSON object in ``raw``, or None when it is not one."""
    if not raw.strip():
        # Some servers send "" for a tool without parameters; a cut-off reply sent nothing usable.
        return None if cut_off else {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def overflow(status: object, code: str, message: str, body: object) -> bool:
    """Tell whether a 4xx says the prompt does not fit the model's window."""
    if status == 413:
        return True
    if status not in (400, 422):
        return False
    return code == "context_length_exceeded" or mentions_context(message, body)
