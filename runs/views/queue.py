"""The attention queue (home page) and the bulk-action confirm step."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_http_methods

from approvals.actions import BULK_ACTIONS
from approvals.bulk import bulk_preview
from approvals.forms import REASON_MAX
from approvals.roles import can_operate
from runs import selectors as sel
from runs.list_filters import list_query_parse
from runs.scope import visible_teams
from runs.selectors_lists import run_agent_names, saved_view_list
from runs.statuses import REASON_LABELS
from runs.views import _dispatch
from runs.views._common import page, role_required

TAB_LABELS = {"waiting": "Waiting", "blocked": "Blocked", "unknown": "Unknown",
              "approvals": "Approvals", "running": "Running", "succeeded": "Succeeded",
              "exceptions": "Completed with exceptions", "failed": "Failed",
              "cancelled": "Cancelled", "all": "All"}


@require_GET
@role_required()
def queue(request: HttpRequest) -> HttpResponse:
    """Show one tab of runs (a keyset page), or the same runs grouped by failure signature."""
    query = list_query_parse(request.GET)
    tab, filters, grouped = query.tab, query.filters, query.grouped
    teams = visible_teams(request.user)
    context = {
        "tab": tab, "tabs": TAB_LABELS, "filters": filters, "grouped": grouped,
        "counts": sel.run_counts_by_tab(teams=teams), "agents": run_agent_names(teams=teams),
        "teams": sel.team_choices(teams=teams),
        "reasons": list(REASON_LABELS.items()), "ages": list(sel.AGES),
        "filter_params": filters.as_params(), "query_errors": query.errors,
        "saved_views": saved_view_list(user=request.user),
        "view_query": query.as_query_string(), "cursor": query.cursor,
    }
    if grouped:
        context["groups"] = sel.run_groups_by_signature(filters=filters, teams=teams)
    else:
        context["page"] = sel.run_list_attention(tab=tab, filters=filters, teams=teams,
                                                 cursor=query.cursor)
    return page(request, "runs/queue.html", context, partial="results")


@require_http_methods(["GET", "POST"])
@role_required(can_operate)
def bulk(request: HttpRequest) -> HttpResponse:
    """Show the runs a bulk action would touch and what it does to each (GET); apply it with
    a reason (POST) and show each run's result."""
    data = request.POST if request.method == "POST" else request.GET
    # The queue's own parser: a filter the list applied is never dropped from "all matching".
    query = list_query_parse(data)
    tab, filters = query.tab, query.filters
    all_matching = data.get("all") == "1"
    teams = visible_teams(request.user)
    ids = sel.run_ids_visible(data.getlist("run")[:1000], teams=teams)
    qs = sel.run_filter(tab=tab, filters=filters, teams=teams)
    count = sel.run_count_capped(qs) if all_matching else len(ids)
    verb = data.get("verb", "") if data.get("verb", "") in BULK_ACTIONS else ""
    action = BULK_ACTIONS.get(verb)
    context = {"tab": tab, "filters": filters, "all_matching": all_matching, "ids": ids,
               "count": count, "count_capped": count > sel.COUNT_CAP,
               "actions": list(BULK_ACTIONS.values()), "verb": verb, "action": action,
               "confirm_rule": action.confirmation(None) if action else None,
               "bulk_reason": data.get("bulk_reason", ""), "filter_params": filters.as_params(),
               "errors": list(query.errors), "results": None}
    if request.method == "POST" and not query.errors:
        context.update(_bulk_apply(request, context, qs))
    if context["results"] is None:
        context["lines"] = bulk_preview(verb=verb, actor=request.user, teams=teams,
                                        run_ids=None if all_matching else ids,
                                        queryset=qs if all_matching else None)
    return page(request, "runs/bulk.html", context, partial="body",
                status=422 if context["errors"] else 200)


def _bulk_apply(request: HttpRequest, context: dict, qs) -> dict:
    errors = []
    if not context["verb"]:
        errors.append("Choose an action.")
    if not context["bulk_reason"].strip():
        errors.append("A reason is required for a bulk action.")
    elif len(context["bulk_reason"].strip()) > REASON_MAX:
        errors.append(f"The reason is {len(context['bulk_reason'].strip()):,} characters; the "
                      f"limit is {REASON_MAX:,}. Shorten it (nothing was done).")
    if not context["count"]:
        errors.append("No runs selected.")
    if errors:
        return {"errors": errors}
    run_ids = None if context["all_matching"] else context["ids"]
    outcome = _dispatch.bulk(verb=context["verb"], run_ids=run_ids,
                             queryset=qs if context["all_matching"] else None,
                             user=request.user, reason=context["bulk_reason"].strip(),
                             teams=visible_teams(request.user),
                             confirm=request.POST.get("confirm", ""))
    if outcome.error:
        return {"errors": [outcome.error]}
    return {"results": outcome.results, "tally": _tally(outcome.results)}


def _tally(results: list[dict]) -> dict[str, int]:
    tally = {"done": 0, "refused": 0, "error": 0, "skipped": 0}
    for r in results:
        tally[r["outcome"]] = tally.get(r["outcome"], 0) + 1
    return tally
