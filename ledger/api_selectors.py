"""Read-side queries of the REST API for the ledger: a tool call, and its full result.

The full result comes from the artifact store. Sensitive arguments are stored redacted, but
a tool may echo them in its output, so the expanded result is scrubbed of the call's sealed
values and of keys named like its sensitive arguments before it leaves.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from cryptography.fernet import InvalidToken

from ledger.artifacts import artifact_read
from ledger.errors import ToolCallNotFound
from ledger.models import Artifact, ToolCall
from ledger.sealed import unseal

logger = logging.getLogger(__name__)
REDACTED = "[redacted]"
# Short values (a 2-digit count, "yes") would scrub innocent text; secrets are longer.
_MIN_SCRUB_LEN = 4


def toolcall_get(*, tool_call_id: str) -> ToolCall:
    """Return the tool call or raise ToolCallNotFound."""
    call = ToolCall.objects.filter(tool_call_id=tool_call_id).first()
    if call is None:
        raise ToolCallNotFound(f"no tool call {tool_call_id}", tool_call_id=tool_call_id)
    return call


def _sensitive(call: ToolCall) -> tuple[set[str], list[str]]:
    """Return the sensitive argument names and their clear values (as strings)."""
    names = {k for k, v in call.args.items() if isinstance(v, str) and v.startswith("[redacted")}
    try:
        sealed = unseal(call.sealed_args)
    except (InvalidToken, ValueError):
        logger.warning("sealed args of %s cannot be opened; redacting by name only",
                       call.tool_call_id)
        sealed = {}
    names |= set(sealed)
    values = [v if isinstance(v, str) else json.dumps(v) for v in sealed.values()]
    return names, [v for v in values if len(v) >= _MIN_SCRUB_LEN]


def _scrub_text(text: str, values: list[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def _scrub(node: Any, names: set[str], values: list[str]) -> Any:
    if isinstance(node, dict):
        return {k: REDACTED if k in names else _scrub(v, names, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub(v, names, values) for v in node]
    if isinstance(node, str):
        return _scrub_text(node, values)
    return node


def toolcall_result(*, call: ToolCall) -> tuple[Any, str | None]:
    """Return the call's full result (scrubbed) and its content type; inline facts if none."""
    names, values = _sensitive(call)
    if not call.artifact_sha256:
        return _scrub(call.facts, names, values), "application/json"
    data = artifact_read(call.artifact_sha256)
    row = Artifact.objects.filter(sha256=call.artifact_sha256).first()
    content_type = row.content_type if row else "application/octet-stream"
    text = data.decode("utf-8", errors="replace")
    if content_type == "application/json":
        try:
            return _scrub(json.loads(text), names, values), content_type
        except ValueError:
            pass
    return _scrub_text(text, values), content_type
