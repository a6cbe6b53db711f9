"""Row builders for API tests (tool calls and approvals made with model creates)."""
from __future__ import annotations

import secrets
from typing import Any

from approvals.models import Approval
from ledger.models import ToolCall
from runs.models import Run


def make_tool_call(run: Run, *, tool: str = "send_email", **fields: Any) -> ToolCall:
    """Create a ledger row of ``run``."""
    values = {"step_key": "main", "turn": 1, "args": {"to": "a@example.com"},
              "args_hash": "0" * 64, "status": "succeeded", **fields}
    return ToolCall.objects.create(tool_call_id=f"tc_{secrets.token_hex(12)}", run=run,
                                   tool=tool, idempotency_key=secrets.token_hex(32), **values)


def make_approval(run: Run, *, tool_call: ToolCall | None = None, **fields: Any) -> Approval:
    """Create a pending approval of a new (or the given) tool call of ``run``."""
    call = tool_call or make_tool_call(run, status="awaiting_approval")
    return Approval.objects.create(run=run, tool_call=call, tool=call.tool,
                                   proposed_args=call.args, state_seq=run.last_seq, **fields)
