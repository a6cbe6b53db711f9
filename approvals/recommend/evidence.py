"""Which confirmation the evidence favours for a write whose outcome is unknown, and why.

The evidence: what the probe said (if the tool has one), what made the call ambiguous and
how long the attempt ran against the tool's timeout, and how people confirmed this tool's
earlier unknown calls. A person still checks the outside world; the panel says which answer
is likelier and what it rests on, and what to check.
"""
from __future__ import annotations

from approvals.recommend.classes import Recommendation
from approvals.recommend.situation import Situation

EXECUTED, NOT_EXECUTED = "confirm_executed", "confirm_not_executed"
FAST_FAIL_MS = 1000  # a connection refused this fast rarely reached the backend
HISTORY_MIN = 3  # earlier confirmations needed before the tool's history decides


def _probe_text(sit: Situation) -> str:
    texts = {"unreachable": "its probe could not be reached",
             "not_found_early": ("its probe found no trace, but asked before the attempt's "
                                 "deadline, so a late write is still possible")}
    return texts.get(sit.evidence.probe, "it has no idempotency key and no probe")


def _timing_lean(sit: Situation) -> tuple[str, str]:
    ev = sit.evidence
    ms = ev.elapsed_ms
    if ev.probe == "not_found_early":
        return NOT_EXECUTED, "the probe found no trace of it"
    if ev.cause == "transient" and ms is not None and ms < FAST_FAIL_MS:
        return NOT_EXECUTED, (f"the connection failed after {ms} ms, before the request "
                              "likely reached the backend")
    if ev.cause == "worker_lost":
        return EXECUTED, "the worker died while the call was running, after it was sent"
    ran = [f"the attempt ran {_duration(ms)}"] if ms is not None else []
    ran += [f"its timeout is {ev.timeout_s:g}s"] if ev.timeout_s else []
    ran_text = f" ({'; '.join(ran)})" if ran else ""
    what = "it timed out" if ev.cause in ("", "timeout") else f"it failed ({ev.cause})"
    return EXECUTED, (f"{what} after the request was sent{ran_text}; such writes "
                      "usually happened")


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < FAST_FAIL_MS else f"{ms / 1000:.1f}s"


def _history_lean(sit: Situation) -> tuple[str, str] | None:
    ev = sit.evidence
    seen = ev.executed_before + ev.not_executed_before
    if seen < HISTORY_MIN:
        return None
    if ev.executed_before * 3 >= seen * 2:
        return EXECUTED, (f"{ev.executed_before} of {seen} earlier unknown {sit.tool} calls "
                          "were confirmed executed")
    if ev.not_executed_before * 3 >= seen * 2:
        return NOT_EXECUTED, (f"{ev.not_executed_before} of {seen} earlier unknown {sit.tool} "
                              "calls were confirmed not executed")
    return None


def confirm_choice(sit: Situation) -> Recommendation:
    """Return the confirmation the evidence favours, with the evidence in the why."""
    if sit.evidence.reconfirmed:
        return Recommendation("terminate", f"{sit.tool} went unknown again after a person "
                              "confirmed it did not execute; stop re-running it and settle it "
                              f"by hand in {sit.tool}'s system", (EXECUTED, NOT_EXECUTED))
    lean, reason = _timing_lean(sit)
    history = _history_lean(sit)
    if history is not None and sit.evidence.probe != "not_found_early":
        if history[0] == lean:
            reason = f"{reason}, and {history[1]}"
        else:
            lean, reason = history[0], f"{history[1]} (timing alone suggested otherwise)"
    label = "It executed" if lean == EXECUTED else "It did not execute"
    other = NOT_EXECUTED if lean == EXECUTED else EXECUTED
    why = (f"{label} is likelier: {reason}. A write may or may not have happened — "
           f"{_probe_text(sit)}; check {sit.tool}'s system before you press it")
    return Recommendation(lean, why, (other, "terminate"))
