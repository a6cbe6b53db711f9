"""A run's trace view: a waterfall of its steps, model calls and tool attempts (runs.trace_view).

A table first (it reads without JavaScript): each row a duration bar on one time axis,
tokens and cost per model call, retries and recovery gaps as rows of their own. A model
call's row opens its request and reply; a prompt too large for the event is an artifact,
opened by its id.
"""
from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from agentops import clock
from runs.errors import RunNotFound
from runs.scope import visible_teams
from runs.selectors_lists import run_get
from runs.trace_view import run_trace
from runs.views._common import page, role_required
from runs.views._timeline import human_seconds


@require_GET
@role_required()
def run_trace_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show the run's waterfall."""
    try:
        run = run_get(run_id=run_id, teams=visible_teams(request.user))
    except RunNotFound as exc:
        raise Http404(exc.message) from exc
    trace = run_trace(run, now=clock.now())
    for row in trace["rows"]:
        row.detail["dur"] = human_seconds(row.seconds)
        row.detail["at"] = "+" + human_seconds(row.detail["offset_s"])
    for tick in trace["ticks"]:
        tick["text"] = human_seconds(tick["label"])
    trace["span"] = human_seconds(trace["span_s"])
    return page(request, "runs/trace.html", {"run": run, "trace": trace}, team=run.team_id)
