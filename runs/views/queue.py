"""The attention queue (home page) and the bulk-action confirm step."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_http_methods

from approvals.actions import BULK_ACTIONS
from approvals.roles import can_operate
from runs import selectors as sel
from runs.statuses import REASON_LABELS
from runs.views import _dispatch
from runs.views._common import page, role_required

TAB_LABELS = {"waiting": "Waiting", "blocked": "Blocked", "unknown": "Unknown",
              "approvals": "Approvals", "running": "Running", "succeeded": "Succeeded",
              "exceptions": "Completed with exceptions", "failed": "Failed",
              "cancelled": "Cancelled", "all": "All"}


def _filters(request: HttpRequest) -> sel.QueueFilters:
    get = request.GET
    return sel.QueueFilters(**{k: get.get(k, "").strip()[:200] for k in
                               ("agent", "reason", "tool", "age", "q", "sig")})


def _tab(request: HttpRequest) -> str:
    tab = request.GET.get("tab", "blocked")
    return tab if tab in sel.TABS else "blocked"


@require_GET
@role_required()
def queue(request: HttpRequest) -> HttpResponse:
    """Show one tab of runs needing attention, or the same runs grouped by failure signature."""
    tab, filters = _tab(request), _filters(request)
    grouped = request.GET.get("view") == "groups"
    context = {
        "tab": tab, "tabs": TAB_LABELS, "filters": filters, "grouped": grouped,
        "counts": sel.run_counts_by_tab(), "agents": sel.run_agent_names(),
        "reasons": list(REASON_LABELS.items()), "ages": list(sel.AGES),
        "filter_params": filters.as_params(),
    }
    if grouped:
        context["groups"] = sel.run_groups_by_signature(filters=filters)
    else:
        context["page"] = sel.run_list_attention(
            tab=tab, filters=filters, cursor=request.GET.get("cursor", ""))
    return page(request, "runs/queue.html", context, partial="results")


@require_http_methods(["GET", "POST"])
@role_required(can_operate)
def bulk(request: HttpRequest) -> HttpResponse:
    """Show how many runs a bulk action would touch (GET); apply it with a reason (POST)."""
    data = request.POST if request.method == "POST" else request.GET
    tab = data.get("tab", "blocked") if data.get("tab") in sel.TABS else "blocked"
    filters = sel.QueueFilters(**{k: data.get(k, "").strip()[:200] for k in
                                  ("agent", "reason", "tool", "age", "q", "sig")})
    all_matching = data.get("all") == "1"
    ids = [i for i in data.getlist("run") if sel.parse_run_id(i)][:1000]
    qs = sel.run_filter(tab=tab, filters=filters)
    count = sel.run_count_capped(qs) if all_matching else len(ids)
    context = {"tab": tab, "filters": filters, "all_matching": all_matching, "ids": ids,
               "count": count, "count_capped": count > sel.COUNT_CAP, "actions": list(BULK_ACTIONS.values()),
               "verb": data.get("verb", ""), "bulk_reason": data.get("bulk_reason", ""),
               "filter_params": filters.as_params(), "errors": [], "results": None}
    if request.method == "POST":
        context.update(_bulk_apply(request, context, qs))
    return page(request, "runs/bulk.html", context,
                status=422 if context["errors"] else 200)


def _bulk_apply(request: HttpRequest, context: dict, qs) -> dict:
    errors = []
    if context["verb"] not in BULK_ACTIONS:
        errors.append("Choose an action.")
    if not context["bulk_reason"].strip():
        errors.append("A reason is required for a bulk action.")
    if not context["count"]:
        errors.append("No runs selected.")
    if errors:
        return {"errors": errors}
    run_ids = None if context["all_matching"] else context["ids"]
    outcome = _dispatch.bulk(verb=context["verb"], run_ids=run_ids,
                             queryset=qs if context["all_matching"] else None,
                             user=request.user, reason=context["bulk_reason"].strip())
    return {"results": outcome.results,
            "errors": [outcome.error] if outcome.error else []}
