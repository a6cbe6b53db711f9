"""Paged tool results and big outputs kept out of memory.

Paging: a tool returns its first page with a summary and ``ToolResult.next_cursor``. Once a
result in the run carries a cursor, the model also gets the built-in read tool
``next_page(tool_call_id, cursor)``; each page it asks for is its own tool call with its own
result, so the context holds exactly the pages asked for. A page comes from the tool's
``pager(ctx, cursor=..., **args)`` when it declares one, else from the tool itself called
again with its recorded arguments plus ``cursor=``. Only cursors a result of that chain
offered are accepted, and a write tool pages only through a declared pager.

Big outputs: ``ToolResult.log`` may be a path or a binary file object instead of text. Its
bytes are streamed to the artifact store in chunks and never read into memory; a file object
is closed after it is stored (a ``tempfile.TemporaryFile`` then disappears), a path is left
where it is (the tool owns the file).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import IO, Any, Iterator

from agentops.redaction import EMPTY, Secrets
from agentops.tools import ToolContext, ToolSpec
from ledger.artifacts import artifact_put_file
from ledger.errors import ToolInvalidArguments
from ledger.models import ToolCall
from ledger.sealed import unseal

NEXT_PAGE = "next_page"
_PARAMETERS = {
    "type": "object",
    "properties": {
        "tool_call_id": {"type": "string", "description": "the call whose result had a cursor"},
        "cursor": {"type": "string", "description": "the next_cursor that result gave"},
    },
    "required": ["tool_call_id", "cursor"],
    "additionalProperties": False,
}


def page_tools(state: dict[str, Any], memo: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Return [the next_page tool schema] once a result in the run has a cursor, else [].

    ``memo`` (one per session) keeps the facts looked at last time and the answer: facts
    are only added or replaced (never edited), so when those are still the first ones, the
    same objects (or equal ones: the list comparison takes the same objects as equal at
    once, without a Python step per fact), only the facts added since are looked at.
    """
    facts = list(state["facts"].values())
    known = memo.get("facts") if memo is not None else None
    if known is not None and len(known) <= len(facts) and known == facts[:len(known)]:
        found = memo["found"] or _cursor_in(facts[len(known):])
    else:
        found = _cursor_in(facts)
    if memo is not None:
        memo["facts"], memo["found"] = facts, found
    return [next_page_spec(None).schema()] if found else []


def _cursor_in(facts: list[Any]) -> bool:
    for f in facts:
        if isinstance(f, dict) and f.get("next_cursor"):
            return True
    return False


def next_page_spec(agent: Any) -> ToolSpec:
    """Return the built-in next_page tool bound to ``agent`` (whose tools it pages)."""

    def next_page(ctx: ToolContext, tool_call_id: str, cursor: str) -> Any:
        origin = _origin(ctx.run_id, tool_call_id)
        _check_cursor(ctx.run_id, origin, cursor)
        spec = agent.tool(origin.tool)
        if spec is None:
            raise ToolInvalidArguments(f"{origin.tool} is not a tool of this agent")
        if spec.is_write and spec.pager is None:
            raise ToolInvalidArguments(f"{origin.tool} changes the world and has no pager; "
                                       "its result cannot be paged")
        args = dict(origin.approved_args or origin.args)
        args.update(unseal(origin.sealed_args))
        return (spec.pager or spec.fn)(ctx, cursor=cursor, **args)

    return ToolSpec(name=NEXT_PAGE, fn=next_page, parameters=_PARAMETERS, effect="read",
                    description="Fetch the next page of an earlier tool result that returned "
                                "a next_cursor. Ask only for the pages you need.")


def _origin(run_id: str, tool_call_id: str) -> ToolCall:
    """Return the first call of a paging chain (following next_page calls back)."""
    seen: set[str] = set()
    call_id = tool_call_id
    while call_id not in seen:
        seen.add(call_id)
        row = ToolCall.objects.filter(run_id=run_id, tool_call_id=call_id).first()
        if row is None:
            raise ToolInvalidArguments(f"there is no tool call {call_id} in this run")
        if row.tool != NEXT_PAGE:
            return row
        call_id = (row.args or {}).get("tool_call_id", "")
    raise ToolInvalidArguments(f"tool call {tool_call_id} does not lead to a paged result")


def _check_cursor(run_id: str, origin: ToolCall, cursor: str) -> None:
    rows = ToolCall.objects.filter(run_id=run_id, tool__in=(origin.tool, NEXT_PAGE))
    offered = set()
    for row in rows.only("tool_call_id", "tool", "args", "facts"):
        if row.pk == origin.pk or row.tool == NEXT_PAGE:
            offered.add((row.facts or {}).get("next_cursor"))
    if cursor not in offered - {None}:
        raise ToolInvalidArguments(f"cursor {cursor!r} was not offered by {origin.tool_call_id} "
                                   "or its pages; use the next_cursor of the last page")


def is_stream(log: Any) -> bool:
    """Return True when a ToolResult.log is a path or file object (streamed, not loaded)."""
    if log is None or type(log) is str or type(log) is bytes:  # most results: no ABC check
        return False
    return isinstance(log, os.PathLike) or hasattr(log, "read")


def log_spill(log: Any, *, head: bytes = b"", secrets: Secrets = EMPTY) -> str:
    """Stream a path/file-object log (after ``head``) to the artifact store; return its sha256."""
    with _opened(log) as src:
        if not head:
            return artifact_put_file(src, content_type="text/plain", secrets=secrets)
        with tempfile.TemporaryFile() as joined:
            joined.write(head)
            src.seek(0)
            shutil.copyfileobj(src, joined, 1 << 20)
            return artifact_put_file(joined, content_type="text/plain", secrets=secrets)


@contextmanager
def _opened(log: Any) -> Iterator[IO[bytes]]:
    if isinstance(log, os.PathLike):
        with open(log, "rb") as fh:
            yield fh
        return
    try:
        yield log
    finally:
        log.close()

