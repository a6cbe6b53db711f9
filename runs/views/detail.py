"""The run page: the panel on top, then progress, budgets, timeline, ledger, events, audit."""
from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from agentops import clock
from approvals.selectors import notify_panel
from approvals.actions import actions_for
from approvals.recommend.advice import advice_for
from approvals.recommend.children import children_advice
from approvals.recommend.reading import contradiction_read
from approvals.recommend.repeats import guard_evidence
from approvals.recommend.precedent import precedent_read
from approvals.recommend.same_failure import same_failure
from runs import selectors as sel
from runs.engine.runtime.world import world_change_last
from runs.errors import RunNotFound
from runs.event_types import EventType
from runs.models import Run
from runs.retry_times import next_attempts
from runs.scope import visible_teams
from runs.stands import run_what_stands
from runs.statuses import RunStatus, is_stuck
from runs.triage import run_next_stuck
from runs.views._common import int_or_none, page, role_required
from runs.views._timeline import timeline
from runs.views.world import effects_for_run_card


def _meter(label: str, used: float, limit: float | None, text: str) -> dict[str, Any]:
    ratio = (used / limit) if limit else None
    level = "" if ratio is None else "crit" if ratio >= 1 else "warn" if ratio >= 0.8 else "ok"
    return {"label": label, "used": int(used), "limit": int(limit) if limit else None,
            "high": int(limit * 0.8) if limit else None, "text": text, "level": level}


def _usd(micros: int | None) -> str:
    return "—" if micros is None else f"${micros / 1_000_000:,.4f}"


def budget_meters(run: Run) -> list[dict[str, Any]]:
    """Return used-vs-limit meters for tokens, calls, cost and time."""
    def lim(v: Any) -> str:
        return "" if v is None else f" / {v:,}"

    meters = [
        _meter("Tokens", run.tokens_used, run.budget_tokens,
               f"{run.tokens_used:,}{lim(run.budget_tokens)}"),
        _meter("Model calls", run.model_calls, run.budget_model_calls,
               f"{run.model_calls:,}{lim(run.budget_model_calls)}"),
        _meter("Tool calls", run.tool_calls, run.budget_tool_calls,
               f"{run.tool_calls:,}{lim(run.budget_tool_calls)}"),
        _meter("Cost", run.cost_micros, run.budget_cost_micros,
               _usd(run.cost_micros) + (f" / {_usd(run.budget_cost_micros)}"
                                         if run.budget_cost_micros else "")),
    ]
    start = run.started_at or run.created_at
    end = run.finished_at or clock.now()
    used = max((end - start).total_seconds(), 0)
    limit = (run.deadline - start).total_seconds() if run.deadline else None
    meters.append(_meter("Time", used, limit, f"{used / 60:,.1f} min"
                         + ("" if limit is None else f" / {limit / 60:,.1f} min")))
    return meters


def _detail(request: HttpRequest, run_id: Any) -> sel.RunDetail:
    """Return the run if the user sees its team; another team's run is 404, like none."""
    try:
        return sel.run_get_detail(run_id=run_id, teams=visible_teams(request.user))
    except RunNotFound as exc:
        raise Http404(exc.message) from exc


def panel_context(request: HttpRequest, detail: sel.RunDetail) -> dict[str, Any]:
    """Return what the panel partial needs (also used after an action)."""
    run = detail.run
    exceptions = ([] if run.status in (RunStatus.QUEUED, RunStatus.RUNNING)
                  else sel.run_exceptions(run=run))
    return {"d": detail, "run": run, "actions": actions_for(run, request.user),
            "advice": advice_for(run=run, user=request.user), "meters": budget_meters(run),
            "timeline": timeline(detail.steps), "exceptions": exceptions,
            "stands": run_what_stands(run=run),
            "next_attempts": next_attempts(run=run), "evidence": guard_evidence(run=run),
            "contradiction": contradiction_read(run=run), "world_change": world_change_last(run),
            "children_advice": children_advice(run=run),
            "same_failure": same_failure(run=run), "precedent": precedent_read(run=run),
            "stuck": is_stuck(run.status), "notify": notify_panel(run_id=run.pk),
            "breaker_until": sel.tool_breaker_closes_at(
                tool=detail.tool_call.tool if detail.tool_call else "", team_id=run.team_id)}


@require_GET
@role_required()
def run_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show a run: the panel (refreshed by htmx) and, on a full load, everything below it."""
    detail = _detail(request, run_id)
    context = panel_context(request, detail)
    if not getattr(request, "htmx", False):
        context.update(
            events=sel.event_page(run=detail.run), event_types=EventType.values,
            event_filter={"type": "", "tool_call_id": ""},
            ledger=sel.ledger_for_run(run_id=run_id),
            snapshots=sel.snapshots_for_run(run_id=run_id),
            audit=sel.interventions_for_run(run_id=run_id),
            world=effects_for_run_card(run_id),
            children=sel.run_children(run=detail.run),
            next_stuck=run_next_stuck(after_id=detail.run.pk,
                                      after_updated_at=detail.run.updated_at,
                                      teams=visible_teams(request.user)),
        )
    return page(request, "runs/detail.html", context, partial="live", team=detail.run.team_id)


@require_GET
@role_required()
def run_events(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show a page of a run's events, newest first, filtered by type or tool call."""
    run = _detail(request, run_id).run
    events = sel.event_page(run=run, before_seq=int_or_none(request.GET.get("before")),
                            type=request.GET.get("type", "")[:40],
                            tool_call_id=request.GET.get("tool_call_id", "")[:40])
    return page(request, "runs/detail.html",
                {"run": run, "events": events, "event_types": EventType.values,
                 "event_filter": {"type": request.GET.get("type", ""),
                                  "tool_call_id": request.GET.get("tool_call_id", "")},
                 "events_only": True},
                partial="events", always_partial=True, team=run.team_id)


@require_GET
@role_required()
def run_ledger(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show a page of a run's tool calls."""
    run = _detail(request, run_id).run
    ledger = sel.ledger_for_run(run_id=run.pk, after_id=int_or_none(request.GET.get("after")))
    return page(request, "runs/detail.html", {"run": run, "ledger": ledger,
                                              "ledger_only": True}, partial="ledger",
                always_partial=True, team=run.team_id)
