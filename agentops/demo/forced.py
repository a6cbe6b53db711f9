"""A model-client wrapper that forces each plan step's tool, for small real models.

Small local models (Gemma 3 270M on llama.cpp) only emit a tool call when a named tool is
forced, and the engine calls ``complete()`` without ``tool_choice``. This wrapper reads the
current step and turn from the context the engine built and, on the step's first turn (and
after a failed call, up to ``force_turns``), forces that step's tool; on later turns it sends
no tools, so the model answers in text and the step ends.
"""
from __future__ import annotations

import json
import re
from typing import Any

from agentops.llm.protocol import ModelClient, ModelReply

_STEP = re.compile(r"^## Current step: (?P<step>\S*) \(turn (?P<turn>\d+)\)", re.M)


class ForcedToolModel:
    """Wrap ``inner`` so that step ``s`` forces tool ``step_tools[s]``."""

    def __init__(self, inner: ModelClient, step_tools: dict[str, str], *,
                 force_turns: int = 2, max_tokens: int = 256) -> None:
        self.inner = inner
        self.step_tools = step_tools
        self.force_turns = force_turns
        self.max_tokens = max_tokens
        self.context_window = inner.context_window

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 tool_choice: str | dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> ModelReply:
        """Return the inner model's reply with the step's tool forced (or no tools)."""
        step, turn = current_step(messages)
        name = self.step_tools.get(step)
        force = name is not None and (turn == 1 or (turn <= self.force_turns
                                                    and _last_call_failed(messages)))
        if tool_choice is None and force:
            tools, tool_choice = [t for t in tools if t["function"]["name"] == name], name
        elif tool_choice is None and name is not None:
            tools = []
        return self.inner.complete(messages=messages, tools=tools, tool_choice=tool_choice,
                                   max_tokens=max_tokens or self.max_tokens)


def current_step(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """Return (step key, turn) named by the engine's "## Current step" message."""
    for msg in reversed(messages):
        m = _STEP.search(str(msg.get("content") or ""))
        if m:
            return m["step"], int(m["turn"])
    return "", 1


def _last_call_failed(messages: list[dict[str, Any]]) -> bool:
    for msg in reversed(messages):
        if msg.get("role") == "tool":
            try:
                return json.loads(msg["content"]).get("status") != "succeeded"
            except (TypeError, ValueError):
                return True
    return False
