"""Self-check after a restore: verify the restored state before the next unit runs.

A run is restored when a worker died (``run.recovered``), it was forked (``run.forked``),
migrated to another agent version (``run.migrated``) or imported from checkpoint files
(``run.imported``). The first session after such an event checks, before any unit:

- the goal is present and the one the run was created with;
- the completed steps agree with the event log, and every call the state holds as succeeded
  has its ledger row, succeeded, with the same facts;
- every open ledger row (pending, running, awaiting approval) is one the state lists as open,
  and no attempt is running while its call is not (a straggler: nobody will close it);
- the plan's preconditions hold: inputs of the run and of unfinished steps still exist
  (``"file:<path>"``, ``"artifact:<sha256>"`` and ``"fact:<tool_call_id>"`` references), every
  artifact the run's calls refer to verifies by checksum, no pending approval has expired.

A pass is recorded (``guard.self_checked``) so it runs once per restore. A failure blocks the
run as ``self_check_failed`` naming each problem; an operator's retry checks again.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db.models import Count, Q

from agentops import clock
from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from ledger.artifacts import artifact_verify
from ledger.errors import ArtifactCorrupted, ArtifactMissing
from ledger.models import ToolAttempt, ToolCall
from ledger.statuses import DONE_OK, OPEN, ToolCallStatus
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.outcomes import block
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.snapshots import replay_state
from runs.event_types import EventType
from runs.models import Run
from runs.models.event import run_events
from runs.statuses import RunStatus

RESTORE_EVENTS = ("run.recovered", "run.forked", "run.migrated", "run.imported")
_OK_RESULTS = ("succeeded", "confirmed_executed")
_DONE = ("succeeded", "skipped")


def session_checked(session: RunSession, *, migrated: bool = False) -> RunSession | None:
    """Return ``session`` when no check is due or it passes; else block the run, return None."""
    if not _due(session.run, session.state, migrated):
        return session
    problems = self_check(run=session.run, state=session.state)
    if problems:
        detail = "the restored state failed its self-check: " + "; ".join(problems)
        block(session, "self_check_failed", detail,
              events=[NewEvent(EventType.GUARD_SELF_CHECK_FAILED, {"problems": problems})])
        return None
    session.commit([NewEvent(EventType.GUARD_SELF_CHECKED, {"problems": []})])
    return session


def self_check(*, run: Run, state: dict[str, Any]) -> list[str]:
    """Return what is wrong with ``state`` restored for ``run`` (empty when all holds)."""
    return [*_goal(run, state), *_steps(run, state), *_ledger(state), *_open_rows(run, state),
            *_stray_attempts(run),
            *_inputs(state), *_artifacts(run, state), *_approvals(run)]


def _due(run: Run, state: dict[str, Any], migrated: bool) -> bool:
    if not (migrated or state["recoveries"] or run.forked_from_id or state.get("imported")):
        return False
    return run_events(run).filter(type__in=RESTORE_EVENTS,
                                seq__gt=state.get("self_checked", 0)).exists()


def _goal(run: Run, state: dict[str, Any]) -> list[str]:
    goal = state["run"].get("goal")
    if not goal:
        return ["the goal is missing from the restored state"]
    created = (run_events(run).filter(type="run.created").order_by("seq")
               .values_list("data", flat=True).first()) or {}
    if created.get("goal") != goal or run.goal != goal:
        return [f"the goal changed: the run was created with {created.get('goal')!r}, "
                f"the restored state has {goal!r}"]
    return []


def _steps(run: Run, state: dict[str, Any]) -> list[str]:
    logged = replay_state(run)["steps"]
    out = []
    for key in sorted(set(state["steps"]) | set(logged)):
        mine = state["steps"].get(key, {}).get("status", "absent")
        theirs = logged.get(key, {}).get("status", "absent")
        if (mine in _DONE) != (theirs in _DONE):
            out.append(f"step {key} is {mine} in the restored state but {theirs} in the event log")
    return out


def _calls(state: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    since = (state.get("imported") or {}).get("turn", 0)
    for turn in state["turns"]:
        if turn["n"] > since:
            for call in turn["calls"]:
                yield call, call.get("result") or {}


def _ledger(state: dict[str, Any]) -> list[str]:
    done = {c["id"]: r for c, r in _calls(state)
            if r.get("status") in _OK_RESULTS and not r.get("deduplicated")}
    rows = {r.tool_call_id: r for r in ToolCall.objects.filter(tool_call_id__in=list(done))}
    out = []
    for call_id, result in done.items():
        row = rows.get(call_id)
        if row is None:
            out.append(f"call {call_id} succeeded in the log but has no ledger row")
        elif row.status not in (*DONE_OK, ToolCallStatus.COMPENSATED):
            out.append(f"call {call_id} ({row.tool}) succeeded in the log but the ledger says "
                       f"{row.status}")
        elif (result.get("status") == "succeeded" and row.status == ToolCallStatus.SUCCEEDED
              and row.facts != result.get("facts")):
            out.append(f"call {call_id} ({row.tool}): the ledger's facts differ from the log's")
    return out


def _open_rows(run: Run, state: dict[str, Any]) -> list[str]:
    rows = ToolCall.objects.filter(run_id=run.pk, status__in=list(OPEN))
    return [f"ledger row {r.tool_call_id} ({r.tool}) is {r.status} but the run does not list "
            "it as open: it was never reconciled"
            for r in rows if r.tool_call_id not in state["open_calls"]]


def _stray_attempts(run: Run) -> list[str]:
    rows = (ToolAttempt.objects.filter(tool_call__run_id=run.pk, status=ToolCallStatus.RUNNING)
            .exclude(tool_call__status=ToolCallStatus.RUNNING).select_related("tool_call"))
    return [f"attempt #{a.attempt} of {a.tool_call.tool_call_id} ({a.tool_call.tool}) is "
            f"running but its call is {a.tool_call.status}: nobody will close it" for a in rows]


def attempts_running_unleased() -> dict[str, int]:
    """Return how many attempts are running with no live lease on their run, by run status.

    The installation-wide form of the invariant "no attempt running without a live lease"
    (``/metrics``). A recovered run waiting in the queue counts until its next tick
    reconciles the call (seconds); a stopped run's attempt never should (runs.engine.runtime
    .stragglers closes them).
    """
    live = Q(tool_call__run__status=RunStatus.RUNNING,
             tool_call__run__lease_expires_at__gte=clock.now())
    rows = (ToolAttempt.objects.filter(status=ToolCallStatus.RUNNING).exclude(live).order_by()
            .values("tool_call__run__status").annotate(n=Count("id")))
    return {r["tool_call__run__status"]: r["n"] for r in rows}


def _inputs(state: dict[str, Any]) -> list[str]:
    places = [("the run", state["run"].get("input") or {})]
    places += [(f"step {s['key']}", s.get("input") or {}) for s in state["plan"]
               if state["steps"].get(s["key"], {}).get("status") not in _DONE]
    out = []
    for where, data in places:
        for name, ref in _refs(data):
            problem = _ref_problem(ref, state)
            if problem:
                out.append(f"input {name} of {where}: {problem}")
    return out


def _refs(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _refs(v, f"{path}.{k}" if path else k)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _refs(v, f"{path}[{i}]")
    elif isinstance(data, str) and data.split(":", 1)[0] in ("file", "artifact", "fact"):
        yield path, data


def _ref_problem(ref: str, state: dict[str, Any]) -> str:
    kind, target = ref.split(":", 1)
    if kind == "file":
        return "" if Path(target).exists() else f"file {target} no longer exists"
    if kind == "fact":
        return "" if target in state["facts"] else f"fact {target} is not in the state"
    try:
        artifact_verify(target)
    except (ArtifactMissing, ArtifactCorrupted) as exc:
        return exc.message
    return ""


def _artifacts(run: Run, state: dict[str, Any]) -> list[str]:
    shas = {r["artifact"]: c["id"] for c, r in _calls(state) if r.get("artifact")}
    for call_id, sha in ToolCall.objects.filter(run_id=run.pk).exclude(
            artifact_sha256="").values_list("tool_call_id", "artifact_sha256"):
        shas.setdefault(sha, call_id)
    out = []
    for sha, call_id in sorted(shas.items()):
        try:
            artifact_verify(sha)
        except (ArtifactMissing, ArtifactCorrupted) as exc:
            out.append(f"the result artifact of call {call_id}: {exc.message}")
    return out


def _approvals(run: Run) -> list[str]:
    expired = Approval.objects.filter(run_id=run.pk, status=ApprovalStatus.PENDING,
                                      expires_at__lt=clock.now()).select_related("tool_call")
    return [f"approval {a.pk} for {a.tool} ({a.tool_call.tool_call_id}) expired at "
            f"{a.expires_at.isoformat(timespec='seconds')} without a decision" for a in expired]
