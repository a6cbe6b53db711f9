"""The approvals inbox: pending requests with approve / reject / edit-and-approve, and history."""
from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from approvals.confirmation import (approval_needs_confirmation, confirmation_error,
                                    confirmation_prompt)
from approvals.forms import EditArgsForm, RejectForm, args_diff, reason_error
from approvals.remote_decisions import decision_sentence
from approvals.roles import can_decide_approvals
from approvals.selectors import (approval_get, approval_list_decided, approval_list_pending,
                                 approval_votes)
from approvals.statuses import ApprovalStatus
from runs.scope import visible_teams
from runs.views import _dispatch
from runs.views._common import page, role_required


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _items(approvals: list, user: Any) -> list[dict[str, Any]]:
    votes = approval_votes(approvals)
    return [{"a": a, "args_json": _pretty(_current_args(a)),
             "confirm": confirmation_prompt(a) if approval_needs_confirmation(a) else "",
             "votes": votes.get(a.pk, []),
             "counted": sum(1 for v in votes.get(a.pk, []) if v["counts"] and v["approve"]),
             "voted": any(v["who"] == user.get_username() and v["counts"] and v["approve"]
                          for v in votes.get(a.pk, [])),
             # Decide buttons only where the user decides approvals in that run's team.
             "decide": can_decide_approvals(user, a.run.team_id)}
            for a in approvals]


def _current_args(a: Any) -> Any:
    # under the two-person rule an edit becomes the version the next approver decides
    return a.approved_args if a.version > 1 and a.approved_args is not None else a.proposed_args


@require_GET
@role_required()
def inbox(request: HttpRequest) -> HttpResponse:
    """List pending approvals (soonest expiry first) and recent decisions."""
    teams = visible_teams(request.user)
    context = {"pending": _items(approval_list_pending(user=request.user, teams=teams),
                                 request.user),
               "decided": approval_list_decided(teams=teams),
               "focus": request.GET.get("focus", "")}
    return page(request, "approvals/inbox.html", context, partial="pending")


def _pending(request: HttpRequest, approval_id: int):
    """Return the approval if the user sees its run's team; another team's is 404, like none."""
    approval = approval_get(approval_id=approval_id, teams=visible_teams(request.user))
    if approval is None:
        raise Http404("no such approval")
    return approval


@require_POST
@role_required(can_decide_approvals)
def approval_decide(request: HttpRequest, approval_id: int, verb: str) -> HttpResponse:
    """Approve, reject (reason required) or approve with edited arguments."""
    if verb not in _dispatch.APPROVAL_VERBS:
        raise Http404("no such decision")
    approval = _pending(request, approval_id)
    if approval.status != ApprovalStatus.PENDING:
        who = approval.decided_by.get_username() if approval.decided_by else "the system"
        return _back(request, error=f"Already {approval.status} by {who}.", status=409)
    params, error = _decision_params(request, verb, approval)
    if error:
        return _back(request, error=error, status=422, focus=approval.pk)
    outcome = _dispatch.perform(verb, approval=approval, user=request.user, **params)
    if not outcome.ok:
        return _back(request, error=outcome.error, status=outcome.status, focus=approval.pk)
    messages.success(request, decision_sentence(approval, outcome.result, request.user))
    return _back(request)


def _decision_params(request: HttpRequest, verb: str, approval) -> tuple[dict, str]:
    if verb == "reject":
        form = RejectForm(request.POST)
        if not form.is_valid():
            return {}, reason_error(form, "to reject (the agent sees it)")
        return {"reason": form.cleaned_data["reason"]}, ""
    params, args = {"reason": request.POST.get("reason", "").strip()[:2000]}, None
    if verb == "edit_args":
        form = EditArgsForm(request.POST)
        if not form.is_valid():
            return {}, "; ".join(e for errs in form.errors.values() for e in errs)
        args = form.cleaned_data["args"]
        params = {"args": args, "reason": form.cleaned_data["reason"],
                  "diff": args_diff(approval.proposed_args, args)}
    # What is confirmed is what will run: an edited amount, never the proposed one.
    refused = confirmation_error(approval, request.POST.get("confirm", ""), args=args)
    return ({}, refused) if refused else (params, "")


def _back(request: HttpRequest, *, error: str = "", status: int = 200,
          focus: Any = "") -> HttpResponse:
    # Decisions always land back on the inbox (Post/Redirect/Get); the message says what
    # happened, so ``status`` is informational only.
    if error:
        messages.error(request, error)
    url = reverse("console:inbox") + (f"?focus={focus}" if focus else "")
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


@require_POST
@role_required()
def approval_diff(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Validate edited arguments and show their diff against the proposal (no decision)."""
    approval = _pending(request, approval_id)
    form = EditArgsForm(request.POST)
    edited = form.cleaned_data["args"] if form.is_valid() else None
    diff = args_diff(approval.proposed_args, edited) if edited is not None else []
    confirm = confirmation_prompt(approval, edited) \
        if edited is not None and approval_needs_confirmation(approval, edited) else ""
    return page(request, "approvals/inbox.html",
                {"a": approval, "diff": diff, "diff_errors": form.errors.get("args", []),
                 "confirm": confirm},
                partial="diff", always_partial=True)
