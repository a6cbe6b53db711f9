"""What a permanent tool failure means, said about the tool that failed.

The triage table's rows speak of "the tool"; for a tool failure the why names it ("carrier's
backend refused our credentials ... fix the credential, then retry"), so a person reading
one panel knows which system to fix, and that every run using it is refused the same way.
"""
from __future__ import annotations

from approvals.recommend.classes import FailureClass, Row
from approvals.recommend.situation import Situation

F = FailureClass
TOOL_FAILURES = frozenset({F.PERMISSION, F.CREDENTIALS, F.NOT_FOUND, F.BAD_REQUEST,
                           F.API_CHANGED, F.BUSINESS_REJECTION, F.PERMANENT})


def meaning_why(sit: Situation, row: Row) -> str:
    """Return the row's why with the failing tool named (unchanged without a tool)."""
    if sit.failure not in TOOL_FAILURES or not sit.tool:
        return row.why
    return row.why.replace("the tool's", f"{sit.tool}'s").replace("the tool", sit.tool)
