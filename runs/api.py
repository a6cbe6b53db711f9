"""REST endpoints of runs: list, read, start and steer runs; admins' budget policies.

Handlers parse, check the caller's role, call one service or selector, and return.
"""
from __future__ import annotations

import uuid

from django.http import HttpRequest
from ninja import Header, Path, Query, Router, Status

from agentops import api_auth
from approvals import limits
from approvals.actions import RUN_ACTIONS, action_for
from approvals.actions.terminate import Terminate
from approvals.bulk import bulk_apply, bulk_count, bulk_preview
from approvals.teams import admin_scope, admin_team_get
from ledger.schemas import ToolCallOut
from runs import api_selectors as sel
from runs import services
from runs.causation import event_cause_chain
from runs.schemas_outcome import CauseChainOut
from runs.models import BudgetPolicy
from runs.schemas_budgets import BudgetPolicyCreateIn, BudgetPolicyIn, BudgetPolicyOut
from runs.schemas import (
    ActionIn,
    ActionOut,
    ActionPreviewIn,
    ActionPreviewOut,
    BulkActionIn,
    BulkActionOut,
    CancelIn,
    EventPageOut,
    ForkIn,
    RunCreateIn,
    RunFiltersIn,
    RunOut,
    RunPageOut,
    SignalIn,
    SignalOut,
    SnapshotOut,
    SnapshotStateOut,
    StepOut,
)
from runs.services_signals import run_fork, run_signal
from runs.api_teams import team_for_start
from runs.scope import visible_teams
from approvals.roles import can_operate
from approvals.errors import NotAllowed
from runs.models import Run

router = Router(tags=["runs"])
admin_router = Router(tags=["admin"])


def as_query(filters: RunFiltersIn) -> sel.RunQuery:
    """Return the selector query for the API filters."""
    return sel.RunQuery(
        statuses=[str(s) for s in filters.status], agent=filters.agent,
        reason=str(filters.reason or ""), text=filters.text, team=filters.team,
        created_after=filters.created_after, created_before=filters.created_before,
    )


@router.get("", response=RunPageOut, summary="List runs")
def list_runs(request: HttpRequest, filters: Query[RunFiltersIn], cursor: str = "",
              limit: int = Query(50, ge=1, le=200)) -> dict:
    """List runs newest first, filtered; follow ``next_cursor`` for the next page."""
    user = api_auth.viewer(request)
    rows, next_cursor = sel.run_list_page(query=as_query(filters), teams=visible_teams(user),
                                          cursor=cursor, limit=limit)
    return {"items": rows, "next_cursor": next_cursor}


@router.post("", response={201: RunOut}, summary="Start a run")
def create_run(request: HttpRequest, body: RunCreateIn,
               idempotency_key: str | None = Header(None, alias="Idempotency-Key",
                                                    min_length=1, max_length=160)):
    """Start a run; your same Idempotency-Key returns the same run, another body is 409.

    Keys are per user: another user's key never finds (or blocks) your run.
    """
    user = api_auth.operator(request)
    budget = body.budget.model_dump(exclude_none=True) if body.budget else None
    scoped = f"api:u{user.pk}:{idempotency_key}" if idempotency_key else None
    team = team_for_start(user, body.team)
    run = services.run_start(agent=body.agent, goal=body.goal, input=body.input, budget=budget,
                             idempotency_key=scoped, actor=user,
                             constraints=body.constraints, team=team)
    return Status(201, run)


@router.post("/bulk-actions", response=BulkActionOut, summary="Act on many runs")
def act_on_runs(request: HttpRequest, body: BulkActionIn) -> dict:
    """Apply one action to runs by id or by filter; each run gets done / refused and why."""
    user = api_auth.viewer(request)  # the action checks its own roles for every run
    teams = visible_teams(user)
    queryset = (sel.run_query(query=as_query(body.filter), teams=teams)
                if body.filter is not None else None)
    run_ids = body.run_ids
    count = bulk_count(run_ids=run_ids, queryset=queryset, teams=teams)
    if body.preview:
        lines = bulk_preview(verb=body.action, actor=request.auth, run_ids=run_ids,
                             queryset=queryset, teams=teams)
        return {"count": count, "results": [], "previews": [
            {"run_id": str(line.run.pk), "refusal": line.refusal, "calls": line.calls}
            for line in lines]}
    results = bulk_apply(verb=body.action, actor=request.auth, reason=body.reason, teams=teams,
                         run_ids=run_ids, queryset=queryset, confirm=body.confirm)
    return {"count": count, "results": [{**r, "run_id": str(r["run_id"])} for r in results]}


def _visible(request: HttpRequest, run_id: uuid.UUID) -> Run:
    """Return the run if the caller sees its team; another team's run is 404, like none."""
    user = api_auth.viewer(request)
    return sel.run_get(run_id=run_id, teams=visible_teams(user))


def _operator_of(request: HttpRequest, run: Run):
    """Return the caller if they hold the operator role in ``run``'s team, else 403."""
    if not can_operate(request.auth, run.team_id):
        raise NotAllowed("your role in this run's team does not allow you to act on runs")
    return request.auth


@router.get("/{run_id}", response=RunOut, summary="Get a run")
def get_run(request: HttpRequest, run_id: uuid.UUID):
    """Return a run's projection: status, wait, attention, usage against budgets."""
    return _visible(request, run_id)


@router.get("/{run_id}/steps", response=list[StepOut], summary="List a run's steps")
def list_steps(request: HttpRequest, run_id: uuid.UUID):
    """Return the run's plan steps in order."""
    return sel.step_list(run=_visible(request, run_id))


@router.get("/{run_id}/events", response=EventPageOut, summary="Read a run's events")
def list_events(request: HttpRequest, run_id: uuid.UUID,
                after_seq: int = Query(0, ge=0, le=2**62),
                limit: int = Query(100, ge=1, le=1000)) -> dict:
    """Return events after ``after_seq`` in order; call again with ``last_seq`` to tail."""
    run = _visible(request, run_id)
    rows, more = sel.event_list_after(run=run, after_seq=after_seq, limit=limit)
    return {"items": rows, "last_seq": rows[-1].seq if rows else after_seq, "has_more": more}


@router.get("/{run_id}/events/{seq}/cause", response=CauseChainOut,
            summary="Why an event happened")
def event_cause(request: HttpRequest, run_id: uuid.UUID, seq: int = Path(..., ge=1, le=2**62)):
    """Return the event's chain of causes back to its root (start, action, recovery, signal)."""
    run = _visible(request, run_id)
    return event_cause_chain(run=run, seq=seq).as_json()


@router.get("/{run_id}/tool-calls", response=list[ToolCallOut], summary="List a run's tool calls")
def list_tool_calls(request: HttpRequest, run_id: uuid.UUID,
                    offset: int = Query(0, ge=0, le=10**9),
                    limit: int = Query(100, ge=1, le=500)):
    """Return the run's ledger in call order (sensitive arguments redacted)."""
    return sel.toolcall_list(run=_visible(request, run_id), offset=offset, limit=limit)


@router.get("/{run_id}/snapshots", response=list[SnapshotOut], summary="List snapshots")
def list_snapshots(request: HttpRequest, run_id: uuid.UUID,
                   limit: int = Query(20, ge=1, le=200)):
    """Return the newest snapshot headers of a run."""
    return sel.snapshot_list(run=_visible(request, run_id), limit=limit)


@router.get("/{run_id}/snapshots/{seq}", response=SnapshotStateOut, summary="Get a snapshot")
def get_snapshot(request: HttpRequest, run_id: uuid.UUID,
                 seq: int = Path(..., ge=1, le=2**62)):
    """Return one snapshot with its full state."""
    return sel.snapshot_get(run=_visible(request, run_id), seq=seq)


@router.get("/{run_id}/signals", response=list[SignalOut], summary="List a run's signals")
def list_signals(request: HttpRequest, run_id: uuid.UUID,
                 limit: int = Query(100, ge=1, le=500)):
    """Return the signals sent to a run, newest first."""
    return sel.signal_list(run=_visible(request, run_id), limit=limit)


@router.post("/{run_id}/cancel", response=RunOut, summary="Cancel a run")
def cancel_run(request: HttpRequest, run_id: uuid.UUID, body: CancelIn):
    """Cancel a run (the terminate action: audited, its pending approvals go stale); a run
    that has already ended is 409."""
    run = _visible(request, run_id)
    user = _operator_of(request, run)
    action_for(Terminate.verb).execute(user, run, body.reason, confirm=body.confirm)
    run.refresh_from_db()
    return run


@router.post("/{run_id}/fork", response={201: RunOut}, summary="Fork a run")
def fork_run(request: HttpRequest, run_id: uuid.UUID, body: ForkIn):
    """Start a new run from this run's state after event ``seq`` (try an alternative)."""
    run = _visible(request, run_id)
    user = _operator_of(request, run)
    return Status(201, run_fork(run=run, seq=body.seq, actor=user))


@router.post("/{run_id}/signals", response=SignalOut, summary="Send a signal")
def send_signal(request: HttpRequest, run_id: uuid.UUID, body: SignalIn):
    """Deliver a named signal; the same ``key`` again returns the first delivery."""
    run = _visible(request, run_id)
    _operator_of(request, run)
    return run_signal(run=run, name=body.name, payload=body.payload,
                      key=body.key)


@router.post("/{run_id}/actions/preview", response=ActionPreviewOut,
             summary="Preview an action on a run")
def preview_action(request: HttpRequest, run_id: uuid.UUID, body: ActionPreviewIn) -> dict:
    """Say what an action would do (its dialog's lines and plan diff), or why it is refused."""
    action, run = RUN_ACTIONS[body.action], _visible(request, run_id)
    params = body.params.model_dump(exclude_unset=True)
    refusal = action.refusal(request.auth, run)
    rule = None if refusal else action.confirmation(run, **params)
    return {"action": body.action, "refusal": refusal,
            "calls": [] if refusal else action.preview(run, **params),
            "diff": [] if refusal else action.diff(run, **params),
            "confirm": rule.word if rule is not None else ""}


@router.post("/{run_id}/actions", response=ActionOut, summary="Act on a run")
def act_on_run(request: HttpRequest, run_id: uuid.UUID, body: ActionIn) -> dict:
    """Apply an operator action (retry, skip, ...) with a reason; refusals change nothing."""
    params = body.params.model_dump(exclude_unset=True)
    run = _visible(request, run_id)  # the action checks its own roles in the run's team
    changes = RUN_ACTIONS[body.action].execute(request.auth, run, body.reason,
                                               confirm=body.confirm, **params)
    run.refresh_from_db()
    return {"action": body.action, "changes": changes, "run": run}


@admin_router.get("", response=list[BudgetPolicyOut], summary="List budget policies")
def list_budget_policies(request: HttpRequest):
    """Return the policies of the teams you administer (empty agent_name: every agent)."""
    user = api_auth.admin(request)
    return list(admin_scope(BudgetPolicy.objects.select_related("team"), user)
                .order_by("team__slug", "agent_name")[:1000])


@admin_router.post("", response={201: BudgetPolicyOut}, summary="Create a budget policy")
def create_budget_policy(request: HttpRequest, body: BudgetPolicyCreateIn):
    """Create a team's policy of one agent (or for every agent); 409 when it exists."""
    user = api_auth.admin(request)
    values = body.model_dump(exclude={"agent_name", "team"})
    team = admin_team_get(user=user, slug=body.team)
    return Status(201, limits.budget_policy_create(actor=user, team=team,
                                                   agent_name=body.agent_name, values=values))


@admin_router.get("/{policy_id}", response=BudgetPolicyOut, summary="Get a budget policy")
def get_budget_policy(request: HttpRequest, policy_id: int = Path(..., ge=1, le=2**62)):
    """Return one budget policy (of a team you administer; any other is 404)."""
    user = api_auth.admin(request)
    return limits.budget_policy_get(user=user, policy_id=policy_id)


@admin_router.patch("/{policy_id}", response=BudgetPolicyOut, summary="Update a budget policy")
def update_budget_policy(request: HttpRequest, body: BudgetPolicyIn,
                         policy_id: int = Path(..., ge=1, le=2**62)):
    """Set the fields sent (null = no limit); the change is written to the audit log."""
    user = api_auth.admin(request)
    return limits.budget_policy_update(actor=user, policy_id=policy_id,
                                       values=body.model_dump(exclude_unset=True))
