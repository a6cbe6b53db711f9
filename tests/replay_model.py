"""Test helper: a model that answers from a recorded run (each turn gets the reply recorded for it).

With recorded tool results (``recorded_results``) a finished run can be replayed through
the engine to check it rebuilds the same state, or to debug it without calling a provider.
"""
from __future__ import annotations

from typing import Any

from agentops.llm.protocol import InvalidRequest, ModelReply, ToolCallRequest, Usage
from agentops.tools import ToolResult
from runs.models import Event


class ReplayModel:
    """A ModelClient replaying the model.replied events of a run, in order."""

    def __init__(self, run_id: Any, *, context_window: int = 32_768) -> None:
        self.context_window = context_window
        self._replies = [
            _reply(e["data"])
            for e in Event.objects.filter(run_id=run_id, type="model.replied")
            .order_by("seq").values("data")
        ]
        self._next = 0

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 tool_choice: Any = None, max_tokens: int | None = None,
                 on_text: Any = None) -> ModelReply:
        """Return the next recorded reply; running past the recording is an error."""
        if self._next >= len(self._replies):
            raise InvalidRequest("the recorded run has no more model replies")
        reply = self._replies[self._next]
        self._next += 1
        return reply


def recorded_results(run_id: Any) -> list[ToolResult]:
    """Return the run's recorded tool results, in the order they were recorded."""
    return [
        ToolResult(facts=e["data"].get("facts") or {}, summary=e["data"].get("summary", ""),
                   missing_fields=tuple(e["data"].get("missing_fields") or ()))
        for e in Event.objects.filter(run_id=run_id, type="tool.result",
                                      data__status="succeeded").order_by("seq").values("data")
    ]


def _reply(data: dict[str, Any]) -> ModelReply:
    calls = tuple(ToolCallRequest(name=c["name"], arguments=c.get("args") or {},
                                  provider_id=c.get("provider_id", "")) for c in data["calls"])
    tokens = (data.get("usage") or {}).get("tokens", 0)
    return ModelReply(text=data.get("text", ""), tool_calls=calls,
                      usage=Usage(prompt_tokens=tokens, cost_micros=(data.get("usage") or {}).get("cost_micros", 0)),
                      finish_reason=data.get("finish_reason", "stop"))
