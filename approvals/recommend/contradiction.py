"""The recommendation for a write whose probe found something else under the call's key.

Something happened (the probe found an effect under the key), but not what the call asked
for (another amount, another recipient). Neither confirmation is simply true: a person looks
in the tool's system, puts it right there or accepts it, then records what stands with "It
executed". "It did not execute" would run the call again with the same key, and a backend
that deduplicates on it returns the same different effect.
"""
from __future__ import annotations

from approvals.recommend.classes import Recommendation
from approvals.recommend.situation import Situation

EXECUTED, NOT_EXECUTED = "confirm_executed", "confirm_not_executed"


def asked_vs_found(sit: Situation) -> str:
    """Return "amount: asked 120, found 210; to: ..." from the probe's differences."""
    return "; ".join(f"{arg}: asked {asked}, found {found}"
                     for arg, asked, found in sit.evidence.differs)


def contradiction_choice(sit: Situation) -> Recommendation:
    """Return what to press when the probe's answer contradicts the call."""
    shown = asked_vs_found(sit) or "the probe says what it found is not what was asked"
    why = (f"its probe found {sit.tool} under this call's key, but not what was asked "
           f"({shown}); something was done, so check {sit.tool}'s system, put it right there "
           "or accept it, then press It executed with the facts that stand. It did not "
           "execute would run it again with the same key, which may return the same "
           "different effect")
    return Recommendation(EXECUTED, why, ("terminate", NOT_EXECUTED))
