"""A deterministic model for tests and the demo: replies scripted per step and turn.

The script maps a step key to the replies of its turns, in order. An item is a ModelReply,
an exception to raise, or a function of ScriptContext returning either. The model reads the
step and turn from the context the engine builds, so it answers the same after a recovery.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentops.llm.protocol import ModelReply, ToolCallRequest, Usage

_STEP = re.compile(r"^## Current step: (?P<step>\S*) \(turn (?P<turn>\d+)\)", re.M)
Item = ModelReply | BaseException | Callable[["ScriptContext"], "ModelReply | BaseException"]


@dataclass
class ScriptContext:
    """What a scripted reply can look at."""

    step: str
    turn: int
    attempt: int
    goal: str
    input: dict[str, Any]
    messages: list[dict[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)

    def fact(self, name: str, default: Any = None) -> Any:
        """Return the latest confirmed fact called ``name`` from tool results in the context."""
        for msg in reversed(self.messages):
            if msg.get("role") == "tool":
                body = json.loads(msg["content"])
                if name in (body.get("facts") or {}):
                    return body["facts"][name]
        return default


def call(tool: str, **args: Any) -> ModelReply:
    """Return a reply asking for one tool call."""
    return calls((tool, args))


def calls(*pairs: tuple[str, dict[str, Any]]) -> ModelReply:
    """Return a reply asking for several tool calls at once."""
    reqs = tuple(ToolCallRequest(name=n, arguments=a, raw_arguments=json.dumps(a),
                                 provider_id=f"call_{i}") for i, (n, a) in enumerate(pairs))
    return ModelReply(tool_calls=reqs, usage=Usage(50, 10), finish_reason="tool_calls")


def say(text: str) -> ModelReply:
    """Return a final text reply (ends the step)."""
    return ModelReply(text=text, usage=Usage(50, 10), finish_reason="stop")


class ScriptedModel:
    """A ModelClient answering from a script; see the module docstring."""

    def __init__(self, script: dict[str, list[Item]] | Callable[[ScriptContext], Any],
                 *, context_window: int = 32_768, default: Item | None = None) -> None:
        self.script = script
        self.context_window = context_window
        self.default = default if default is not None else say("done")
        self._attempts: dict[tuple[str, int], int] = {}
        self.calls = 0

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 tool_choice: Any = None, max_tokens: int | None = None,
                 on_text: Any = None) -> ModelReply:
        """Return the scripted reply for the step and turn named in ``messages``."""
        self.calls += 1
        ctx = self._context(messages)
        item = self._item(ctx)
        if callable(item) and not isinstance(item, (ModelReply, BaseException)):
            item = item(ctx)
        if isinstance(item, BaseException):
            raise item
        return item

    def _item(self, ctx: ScriptContext) -> Item:
        if callable(self.script):
            return self.script
        replies = self.script.get(ctx.step, [])
        return replies[ctx.turn - 1] if ctx.turn <= len(replies) else self.default

    def _context(self, messages: list[dict[str, Any]]) -> ScriptContext:
        step, turn = "", 1
        for msg in reversed(messages):
            m = _STEP.search(str(msg.get("content") or ""))
            if m:
                step, turn = m["step"], int(m["turn"])
                break
        key = (step, turn)
        self._attempts[key] = self._attempts.get(key, 0) + 1
        goal, data = _pinned(messages)
        return ScriptContext(step=step, turn=turn, attempt=self._attempts[key], goal=goal,
                             input=data, messages=messages)


def _pinned(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    for msg in messages:
        content = str(msg.get("content") or "")
        if content.startswith("## Goal"):
            goal = content.split("\n", 2)[1]
            raw = content.split("## Input\n", 1)[1] if "## Input\n" in content else "{}"
            return goal, json.loads(raw)
    return "", {}

