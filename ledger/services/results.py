"""Result layering: facts (stable) + summary (for the model) + log (artifact only).

What enters the model's context is bounded: facts and summary up to a size limit; anything
larger, and every log, goes to the artifact store and is reachable by tool_call_id.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


from agentops.hot_settings import hot_setting
from agentops.jsonstate import NotJSONSerializable, check_json, json_encoder, strip_nul
from agentops.redaction import EMPTY, Secrets
from agentops.tools import ToolResult
from ledger.artifacts import artifact_put
from ledger.services.paging import is_stream, log_spill


_FACTS_TEXT = json_encoder(ensure_ascii=False)  # as json.dumps(..., ensure_ascii=False)


class InvalidToolOutput(Exception):
    """A tool returned something that is not a ToolResult/dict of JSON facts."""

    category = "invalid_tool_output"


@dataclass
class Layered:
    """A tool result split into what the context holds and what only the artifact holds."""

    facts: dict[str, Any]
    summary: str
    artifact: str = ""
    missing_fields: list[str] = field(default_factory=list)
    next_cursor: str | None = None
    truncated: bool = False
    has_log: bool = False  # the artifact holds the tool's log (the attempt links it)


def result_layer(raw: Any, *, tool: str, secrets: Secrets = EMPTY) -> Layered:
    """Return ``raw`` (a ToolResult or dict) layered, oversized parts moved to an artifact.

    Every part is scrubbed of ``secrets`` before anything is measured or stored.
    """
    if isinstance(raw, dict):
        raw = ToolResult(facts=raw, summary="")
    if not isinstance(raw, ToolResult):
        raise InvalidToolOutput(
            f"tool {tool} returned {type(raw).__name__}; return a ToolResult or a dict of facts"
        )
    try:
        check_json(raw.facts, "facts")
    except NotJSONSerializable as exc:
        raise InvalidToolOutput(f"tool {tool} returned facts that are not JSON: {exc}") from None
    raw = _scrubbed(raw, secrets)
    limit = hot_setting("AGENTOPS_INLINE_RESULT_BYTES")
    facts_text = _FACTS_TEXT(raw.facts)
    summary = strip_nul(raw.summary or "")  # text for the model: repaired, not refused
    if is_stream(raw.log):
        return _layer_streamed(raw, facts_text, summary, limit, secrets)
    log = raw.log.encode() if isinstance(raw.log, str) else (raw.log or b"")
    out = Layered(facts=raw.facts, summary=summary, missing_fields=list(raw.missing_fields),
                  next_cursor=raw.next_cursor)
    if len(facts_text) + len(summary) <= limit and not log:
        return out
    payload = log if log else facts_text.encode()
    if log and len(facts_text) + len(summary) > limit:
        payload = json.dumps({"facts": raw.facts, "summary": summary}).encode() + b"\n" + log
    kind = "application/json" if not log else "text/plain"
    out.artifact = artifact_put(payload, content_type=kind, secrets=secrets)
    out.has_log = bool(log)
    if len(facts_text) > limit:
        out.facts = _shrink(raw.facts, limit)
        out.truncated = True
    if len(summary) > limit:
        out.summary = summary[:limit] + " [truncated; expand the result for the rest]"
        out.truncated = True
    return out


def _scrubbed(raw: ToolResult, secrets: Secrets) -> ToolResult:
    """Return ``raw`` with facts, summary and a text log scrubbed (a streamed log is later)."""
    if not secrets:
        return raw
    log = raw.log
    if isinstance(log, str):
        log = secrets.scrub_text(log)
    elif isinstance(log, bytes):
        log = secrets.scrub_bytes(log)
    return ToolResult(facts=secrets.scrub(raw.facts), summary=secrets.scrub(raw.summary or ""),
                      log=log, missing_fields=raw.missing_fields,
                      next_cursor=secrets.scrub(raw.next_cursor))


def _layer_streamed(raw: ToolResult, facts_text: str, summary: str, limit: int,
                    secrets: Secrets) -> Layered:
    """Layer a result whose log is a path/file: streamed to an artifact, never in memory."""
    big = len(facts_text) + len(summary) > limit
    head = json.dumps({"facts": raw.facts, "summary": summary}).encode() + b"\n" if big else b""
    out = Layered(facts=raw.facts, summary=summary, missing_fields=list(raw.missing_fields),
                  next_cursor=raw.next_cursor,
                  artifact=log_spill(raw.log, head=head, secrets=secrets), has_log=True)
    if len(facts_text) > limit:
        out.facts, out.truncated = _shrink(raw.facts, limit), True
    if len(summary) > limit:
        out.summary = summary[:limit] + " [truncated; expand the result for the rest]"
        out.truncated = True
    return out


def _shrink(facts: dict[str, Any], limit: int) -> dict[str, Any]:
    """Keep the small facts; replace big values by a note (the artifact has them)."""
    kept: dict[str, Any] = {}
    budget = limit
    for k, v in facts.items():
        size = len(json.dumps(v, ensure_ascii=False))
        if size <= budget // 4:
            kept[k] = v
            budget -= size
        else:
            kept[k] = f"[{size} bytes in the result artifact; expand to read]"
    return kept
