"""The built-in ``expand_result`` tool: the model reads a page of a result kept out of its context.

A result too big for the context is stored whole as an artifact; the context lists it by
tool_call_id with its summary (runs.engine.core.context). Once the run has one, the model is
offered ``expand_result(tool_call_id, page)``: a page of that stored result, as text, sized to
fit the context. Any earlier call of the run can be asked for, not only recent ones; an id
of another run, a result shown whole, or a page past the end is refused, saying which.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings

from agentops.tools import ToolContext, ToolResult, ToolSpec
from ledger.artifacts import artifact_page
from ledger.errors import ToolInvalidArguments
from ledger.models import ToolCall

EXPAND_RESULT = "expand_result"
_PARAMETERS = {
    "type": "object",
    "properties": {
        "tool_call_id": {"type": "string",
                         "description": "the call whose full result was kept out of the context"},
        "page": {"type": "integer", "minimum": 1, "description": "which page, from 1"},
    },
    "required": ["tool_call_id"],
    "additionalProperties": False,
}


def expand_tools(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return [the expand_result tool schema] once a result of the run was kept out, else [].

    The schema offered names the listed ids as the choices for ``tool_call_id``: a model that
    decodes to the schema (small local ones do) can then only pick one of them. An older
    id, no longer listed, is still accepted when a model sends it.
    """
    kept = list(state.get("kept_out") or {})
    if not kept:
        return []
    schema = expand_result_spec().schema()
    params = {**_PARAMETERS, "properties": {**_PARAMETERS["properties"]}}
    params["properties"]["tool_call_id"] = {**params["properties"]["tool_call_id"],
                                            "enum": kept}
    schema["function"]["parameters"] = params
    return [schema]


def page_bytes() -> int:
    """Return the size of one page: half the inline limit, so a page always fits the context."""
    return max(settings.AGENTOPS_INLINE_RESULT_BYTES // 2, 256)


def expand_result_spec() -> ToolSpec:
    """Return the built-in expand_result tool."""

    def expand_result(ctx: ToolContext, tool_call_id: str, page: int = 1) -> ToolResult:
        row = ToolCall.objects.filter(run_id=ctx.run_id, tool_call_id=tool_call_id).only(
            "tool", "artifact_sha256", "summary").first()
        if row is None:
            raise ToolInvalidArguments(f"there is no tool call {tool_call_id!r} in this run; "
                                       "use an id from the list of results kept out")
        if not row.artifact_sha256:
            raise ToolInvalidArguments(f"the result of {tool_call_id} ({row.tool}) is shown "
                                       "whole in the context; nothing of it was kept out")
        text, pages = _page_text(row.artifact_sha256, page)
        if page > pages:
            raise ToolInvalidArguments(f"page {page} does not exist: the result of "
                                       f"{tool_call_id} has {pages} page(s)")
        return ToolResult(facts={"tool_call_id": tool_call_id, "page": page, "pages": pages},
                          summary=f"{row.tool} result {tool_call_id}, page {page} of {pages}:\n"
                                  f"{text}")

    return ToolSpec(name=EXPAND_RESULT, fn=expand_result, parameters=_PARAMETERS,
                    effect="read", idempotent=True,
                    description="Read a page of an earlier tool result that was too big for the "
                                "context (listed by tool_call_id under 'Full results kept out'). "
                                "Ask only for the pages you need.")


def _page_text(sha256: str, page: int) -> tuple[str, int]:
    """Return (the text of page ``page``, the number of pages) of a stored result.

    A page is a byte range; a character belongs to the page holding its first byte, so a
    page never starts or ends inside a UTF-8 sequence.
    """
    size = page_bytes()
    raw, total = artifact_page(sha256, (page - 1) * size, size + 3)
    pages = max(-(-total // size), 1)
    head = 0
    while head < len(raw) and head < 3 and raw[head] & 0xC0 == 0x80:
        head += 1
    end = min(size, len(raw))
    while end < len(raw) and raw[end] & 0xC0 == 0x80:
        end += 1
    return raw[head:end].decode("utf-8", "replace"), pages
