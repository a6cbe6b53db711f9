"""Read-side queries of the REST API for the ledger: a tool call, and its full result.

Results are scrubbed when they are written; what was stored before that (or by a tool whose
secret became known later) is scrubbed again on the way out. Every text field of the answer
-- facts, summary, error, the full result -- goes through the run's secrets.
"""
from __future__ import annotations

import json
from typing import Any

from agentops.redaction import Secrets
from ledger.artifacts import artifact_read
from ledger.errors import ToolCallNotFound
from ledger.models import Artifact, ToolCall
from ledger.secrets import run_secrets
from runs.scope import Teams, scoped

_SCRUBBED = ("facts", "summary", "error", "args", "approved_args")


def toolcall_get(*, tool_call_id: str, teams: Teams) -> ToolCall:
    """Return the tool call (its text fields scrubbed of the run's secrets) or raise
    ToolCallNotFound (also for a call of a run of a team outside ``teams``)."""
    call = scoped(ToolCall.objects.select_related("run"), teams, "run__team_id").filter(
        tool_call_id=tool_call_id).first()
    if call is None:
        raise ToolCallNotFound(f"no tool call {tool_call_id}", tool_call_id=tool_call_id)
    call.secrets = run_secrets(call.run_id)
    for name in _SCRUBBED:
        setattr(call, name, call.secrets.scrub(getattr(call, name)))
    return call


def toolcall_result(*, call: ToolCall) -> tuple[Any, str | None]:
    """Return the call's full result (scrubbed) and its content type; inline facts if none."""
    secrets: Secrets = getattr(call, "secrets", None) or run_secrets(call.run_id)
    if not call.artifact_sha256:
        return secrets.scrub(call.facts), "application/json"
    data = artifact_read(call.artifact_sha256)
    row = Artifact.objects.filter(sha256=call.artifact_sha256).first()
    content_type = row.content_type if row else "application/octet-stream"
    text = data.decode("utf-8", errors="replace")
    if content_type == "application/json":
        try:
            return secrets.scrub(json.loads(text)), content_type
        except ValueError:
            pass
    return secrets.scrub_text(text), content_type
