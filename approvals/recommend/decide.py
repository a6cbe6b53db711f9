"""The decision: a Situation in, one recommended action with its why and alternatives out.

Pure (no I/O): start from the failure class's row in the triage table, then weigh it —
a skip must not drop a required write or run writes ahead blind; a retry that already failed
the same way is not offered again; progress decides resume vs restart; reversible writes made
so far put rollback before terminate; an ambiguous write names the confirmation the evidence
favours. docs/triage.md has the table and the rules in prose.
"""
from __future__ import annotations

from dataclasses import replace

from approvals.consequences import Traits, consequence
from approvals.recommend.classes import TABLE, FailureClass, Recommendation, Row
from approvals.recommend.contradiction import contradiction_choice
from approvals.recommend.evidence import confirm_choice
from approvals.recommend.meaning import meaning_why
from approvals.recommend.situation import Situation

F = FailureClass
MOST_DONE = 0.5
LITTLE_DONE = 0.2
_NO_SKIP = (F.VERSION_GONE, F.BUDGET, F.AMBIGUOUS_WRITE, F.TIMER_WAIT)



def decide(sit: Situation) -> Recommendation:
    """Return what a careful operator should do about ``sit``."""
    # Every verb a row names is registered (tests/triage/test_invariants.py checks it).
    return _note_standing(sit, _decide(sit))


def _note_standing(sit: Situation, rec: Recommendation) -> Recommendation:
    """Say, when the run is to end, which writes nothing can undo: they stay done."""
    if rec.action != "terminate" or not sit.standing_writes:
        return rec
    stays = consequence("terminate", "done", Traits("", write=True)).will
    lines = "".join(f"; {tool}: {stays}" for tool in sit.standing_writes[:3])
    return replace(rec, why=f"{rec.why}{lines}")


def _decide(sit: Situation) -> Recommendation:
    if sit.failure == F.TIMER_WAIT:
        return _wait(sit)
    if sit.failure == F.AMBIGUOUS_WRITE:
        return _with_rollback(sit, contradiction_choice(sit) if sit.evidence.probe == "different"
                              else confirm_choice(sit))
    row = TABLE[sit.failure]
    if sit.failure == F.VERSION_GONE:
        rec = _version_gone(sit, row)
    elif sit.failure == F.BUDGET:
        rec = _budget(sit, row)
    else:
        rec = Recommendation(row.action, meaning_why(sit, row), row.alternatives)
        rec = _weigh_skip(sit, row, rec)
        rec = _weigh_repeat(sit, rec)
        rec = _weigh_progress(sit, row, rec)
        rec = _note_retry(sit, row, rec)
    return _with_rollback(sit, rec)


def _pct(sit: Situation) -> str:
    return f"{sit.done} of {sit.total} steps done" if sit.total else "no plan steps done yet"


def _version_gone(sit: Situation, row: Row) -> Recommendation:
    if sit.deployed_version:
        return Recommendation("fork_deployed", f"{row.why}; continue on the deployed version "
                              f"{sit.deployed_version} from where it stopped ({_pct(sit)})",
                              ("terminate",))
    return Recommendation("terminate", f"{row.why} and no version of the agent is deployed; "
                          "deploy one to continue, or terminate", ())


def _budget(sit: Situation, row: Row) -> Recommendation:
    if sit.progress < LITTLE_DONE:
        return Recommendation("terminate", f"{row.why} with {_pct(sit)}; raising it rarely "
                              "finishes the work — terminate and review the budget or the agent",
                              ("raise_budget",))
    return Recommendation("raise_budget", f"{row.why} with {_pct(sit)}; raise it to finish the "
                          "rest", ("terminate",))


def _skip_risk(sit: Situation) -> str:
    """Return why skipping is unsafe here ("" when it is safe)."""
    if sit.is_write:
        return f"skipping drops the step's required write {sit.tool} ({sit.effect})"
    if sit.step_writes_done:
        return (f"skipping forgets the writes this step made ({', '.join(sit.step_writes_done)}),"
                " so later steps may repeat them")
    if sit.writes_ahead:
        return f"skipping runs {', '.join(sit.writes_ahead[:2])} next without this step's facts"
    return ""


def _weigh_skip(sit: Situation, row: Row, rec: Recommendation) -> Recommendation:
    risk = _skip_risk(sit)
    if not risk or sit.failure in _NO_SKIP:
        return rec
    alts = [a for a in rec.alternatives if a != "skip"]
    if not sit.is_write and "skip" in (rec.action, *rec.alternatives):
        alts.append("skip")  # still possible with operator-supplied facts; last, with the risk
    if rec.action != "skip":
        return replace(rec, alternatives=tuple(alts))
    resume = sit.progress >= MOST_DONE and sit.operator_retries == 0 and row.retry_can_help
    action = "retry" if resume else "terminate"
    rest = tuple(a for a in ("terminate", "retry", *alts) if a != action)
    tail = (f"retry keeps the {_pct(sit)}" if resume else f"terminate ({_pct(sit)})")
    if sit.failure == F.PERMISSION and resume:
        tail = f"grant the permission, then retry to keep the {_pct(sit)}"
    return Recommendation(action, f"{rec.why}; {risk}; {tail}", _dedupe(rest))


def _weigh_repeat(sit: Situation, rec: Recommendation) -> Recommendation:
    if rec.action != "retry" or sit.operator_retries < 1:
        return rec
    safe_skip = not _skip_risk(sit) and "skip" in rec.alternatives
    action = "skip" if safe_skip else "terminate"
    rest = _dedupe(tuple(a for a in (*rec.alternatives, "retry") if a != action))
    return Recommendation(action, f"{rec.why}; a retry already failed the same way "
                          f"({sit.operator_retries}x), so do not retry again blind", rest)


def _weigh_progress(sit: Situation, row: Row, rec: Recommendation) -> Recommendation:
    if (rec.action == "terminate" and sit.progress >= MOST_DONE and "retry" in rec.alternatives
            and sit.operator_retries == 0 and row.retry_can_help):
        rest = _dedupe(("terminate", *(a for a in rec.alternatives if a != "retry")))
        return Recommendation("retry", f"{rec.why}; most of the work is done "
                              f"({sit.progress:.0%}), so resume rather than restart", rest)
    restartable = (F.LOOP, F.STALL, F.TURN_LIMIT, F.RECOVERY_LIMIT, F.FAILURE_BUDGET)
    little = sit.progress < LITTLE_DONE and sit.total
    if rec.action in ("skip", "retry") and sit.failure in restartable and little:
        rest = _dedupe((rec.action, *(a for a in rec.alternatives if a != "terminate")))
        return _restart_cheaply(sit, Recommendation(
            "terminate", f"{rec.why}; little is done yet ({sit.progress:.0%}), restarting "
            "is cheap", rest))
    if rec.action == "terminate" and sit.failure == F.NOT_FOUND and little:
        return _restart_cheaply(sit, replace(rec, why=f"{rec.why}; little is done yet "
                                             f"({sit.progress:.0%})"))
    return rec


def _restart_cheaply(sit: Situation, rec: Recommendation) -> Recommendation:
    """Recommend Restart from input over Terminate when no write this run made would repeat."""
    if sit.standing_writes or sit.compensable_done or sit.step_writes_done:
        return rec  # a restart would make them again: the dialog lists them if pressed
    rest = _dedupe(("terminate", *(a for a in rec.alternatives if a != "restart")))
    return Recommendation("restart", f"{rec.why}: Restart from input starts the task again "
                          "as a new run (correct its input in the dialog) and ends this one; "
                          "no write of this run would be made again", rest)


def _note_retry(sit: Situation, row: Row, rec: Recommendation) -> Recommendation:
    if rec.action != "retry":
        return rec
    progress = "" if _pct(sit) in rec.why else f" ({_pct(sit)})"
    why = f"{rec.why}; retry {row.retry_means}{progress}"
    if sit.is_write and sit.effect in ("irreversible", "manual"):
        why += f" (it runs {sit.tool}, {sit.effect}, which did not take effect)"
    return replace(rec, why=why)


def _with_rollback(sit: Situation, rec: Recommendation) -> Recommendation:
    if not sit.compensable_done or "terminate" not in (rec.action, *rec.alternatives):
        return rec
    if sit.status == "blocked" and (rec.action == "terminate" or _goal_lost(sit, rec)):
        return _rollback_and_terminate(sit, rec)
    # Rollback goes just before terminate: "if you would end it, undo what can be undone first".
    rest = [a for a in rec.alternatives if a != "rollback"]
    at = rest.index("terminate") if "terminate" in rest else 0
    return Recommendation(rec.action, rec.why, (*rest[:at], "rollback", *rest[at:]))


def _goal_lost(sit: Situation, rec: Recommendation) -> bool:
    """Return True when a permanent failure means the run cannot reach its goal as asked."""
    return rec.action == "skip" and not TABLE[sit.failure].retry_can_help


def _rollback_and_terminate(sit: Situation, rec: Recommendation) -> Recommendation:
    # One action, never "roll back, then terminate": a rollback on its own would let the run
    # go on and make the undone writes again; this one undoes them and ends the run.
    n = sit.compensable_done
    why = (f"{rec.why}; Roll back and terminate undoes the {n} reversible write(s) and ends "
           "the run in one step (Terminate alone leaves them standing)")
    for tool in sit.standing_writes[:3]:
        stays = consequence("terminate", "done", Traits(tool, write=True))
        why += f"; {tool}: {stays.will}"
    rest = tuple(a for a in (rec.action, *rec.alternatives) if a not in ("rollback",))
    return Recommendation("rollback_terminate", why, _dedupe(("terminate", *rest)))


def _wait(sit: Situation) -> Recommendation:
    reason = sit.wait_reason or "a retry backoff"
    when = (f" at {sit.wait_until:%H:%M:%S} UTC" if sit.wait_until else "")
    early = "; waking early may be rate-limited again" if "rate" in reason else ""
    return Recommendation("wait", f"it waits ({reason}) and retries by itself{when}; Wake now "
                          f"retries at once{early}", ("wake", "terminate"))


def _dedupe(verbs: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(verbs))
