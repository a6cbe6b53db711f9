"""The recommendation a person sees when automation stops: one action, why, alternatives.

Inputs are explicit (``Situation``): failure class, the failing tool's effect, progress from
the run's real state, the writes ahead, the evidence and — at render time — who is looking
(``advice``). ``decide`` is pure; ``situation_read`` reads a real run.
"""
from dataclasses import replace

from approvals.recommend.classes import TABLE, FailureClass, failure_class
from approvals.recommend.decide import LITTLE_DONE, MOST_DONE, Recommendation, decide
from approvals.recommend.reading import situation_read
from approvals.recommend.situation import Evidence, Situation

__all__ = ["LITTLE_DONE", "MOST_DONE", "TABLE", "Evidence", "FailureClass", "Recommendation",
           "Situation", "decide", "failure_class", "recommend_run",
           "situation_read"]


def recommend_run(*, run, state, category: str, tool: str = "", tool_call_id: str = "",
                  status: str = "", hint: dict | None = None) -> Recommendation:
    """Return the recommendation for ``run`` stopped by ``category`` (read from the run)."""
    sit = situation_read(run=run, state=state, category=category, tool=tool,
                         tool_call_id=tool_call_id, hint=hint)
    if status:
        sit = replace(sit, status=status)
    return decide(sit)
