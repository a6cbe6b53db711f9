"""The repair turn: send an unusable tool call back to the model before the engine sees it.

A small model often gets a call almost right: an argument of the wrong type, a key too many,
no call at all when one was required. With ``ModelOptions.repair_turns`` the client tells the
model what was wrong, in the same call, and returns the first usable reply (or the last one:
the engine then records the refused call and its reason like any other).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import jsonschema.validators

from agentops.schema_quick import quick_check
from agentops.llm.protocol import ModelReply, Usage

Send = Callable[[list[dict[str, Any]]], ModelReply]


def complete_with_repair(send: Send, *, messages: list[dict[str, Any]],
                         tools: list[dict[str, Any]], tool_choice: Any,
                         repair_turns: int) -> ModelReply:
    """Call ``send`` and repeat with the problems spelled out while repairs are left."""
    reply = send(messages)
    repairs: list[str] = []
    usage = reply.usage
    while len(repairs) < repair_turns:
        problems = reply_problems(reply, tools=tools, tool_choice=tool_choice)
        if not problems:
            break
        repairs.append("; ".join(problems))
        messages = [*messages, *_repair_messages(reply, problems)]
        reply = send(messages)
        usage = _add(usage, reply.usage)
    return dataclasses.replace(reply, usage=usage, repairs=tuple(repairs)) if repairs else reply


def reply_problems(reply: ModelReply, *, tools: list[dict[str, Any]],
                   tool_choice: Any) -> list[str]:
    """Return what makes ``reply`` unusable for the tools offered (empty when it is fine)."""
    if reply.refused:
        return []  # asking the same again gets the same refusal; the engine stops the step
    if not reply.tool_calls:
        forced = tool_choice not in (None, "auto", "none") and tools
        return ["a tool call was required but the reply had none"] if forced else []
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    problems = []
    for call in reply.tool_calls:
        if call.name not in schemas:
            problems.append(f"there is no tool {call.name!r}; the tools are: {', '.join(schemas)}")
        elif call.arguments is None:
            problems.append(f"the arguments of {call.name} are not a JSON object: "
                            f"{call.raw_arguments[:200]!r}")
        else:
            problems += _schema_errors(call.name, schemas[call.name], call.arguments)
    return problems


def _schema_errors(name: str, schema: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """Return the schema's complaints about ``args`` (the strict form's nulls are allowed)."""
    quick = quick_check(schema)
    if quick is not None and quick(args):
        return []
    cls = jsonschema.validators.validator_for(schema)
    out = []
    for err in cls(schema).iter_errors(args):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        out.append(f"{name} {where}: {err.message}")
    return out[:5]


def _repair_messages(reply: ModelReply, problems: list[str]) -> list[dict[str, Any]]:
    """Return the turn that shows the model its answer and what was wrong with it."""
    shown = [{"name": c.name, "arguments": c.raw_arguments or json.dumps(c.arguments)}
             for c in reply.tool_calls]
    said = reply.text or ""
    if shown:
        said = f"{said}\n(tool calls: {json.dumps(shown)})".strip()
    return [
        {"role": "assistant", "content": said or "(no answer)"},
        {"role": "user", "content": "That reply cannot be used: " + "; ".join(problems)
         + ". Answer again, calling the tool with arguments that match its schema."},
    ]


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                 completion_tokens=a.completion_tokens + b.completion_tokens,
                 cost_micros=a.cost_micros + b.cost_micros)
