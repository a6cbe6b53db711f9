"""Decisions from a message: the signed link page and the Slack-compatible interaction endpoint.

The link page's GET only shows (mail scanners prefetch links); its POST form decides. Both
refuse with a page that says why: the link was altered, expired, used, outdated by an edit
of the arguments, sent to someone else, or the person lacks the role.
"""
from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from agentops.errors import AgentOpsError, ConfigError
from approvals.actions import APPROVAL_ACTIONS
from approvals.confirmation import approval_needs_confirmation, confirmation_prompt
from approvals.errors import LinkRefused
from approvals.links import LinkClaim, link_actor, link_read
from approvals.remote_decisions import decision_sentence, link_decide, slack_decide
from approvals.selectors import approval_votes
from approvals.slack import slack_press_read, slack_verify
from runs.views._common import perms

_TITLES = {"approve": "Approve", "reject": "Reject"}


@require_http_methods(["GET", "POST"])
def decision_link(request: HttpRequest, token: str) -> HttpResponse:
    """Show the approval a signed link names (GET) or decide it as the link's recipient (POST)."""
    try:
        claim = link_read(token)
        user = link_actor(claim, request.user)
    except LinkRefused as exc:
        return _page(request, {"refusal": exc.message}, exc.http_status)
    if request.method == "GET":
        try:
            APPROVAL_ACTIONS[claim.verb].check(user, claim.approval)
        except PermissionDenied as exc:
            return _page(request, _shown(claim, user, str(exc)), 403)
        except AgentOpsError as exc:  # decided already: say by whom
            return _page(request, _shown(claim, user, exc.message), exc.http_status)
        return _page(request, _shown(claim, user, ""))
    reason = request.POST.get("reason", "").strip()[:2000]
    try:
        changes = link_decide(claim=claim, user=user, reason=reason,
                              confirm=request.POST.get("confirm", ""))
    except PermissionDenied as exc:
        return _page(request, _shown(claim, user, str(exc)), 403)
    except AgentOpsError as exc:
        return _page(request, _shown(claim, user, exc.message), exc.http_status)
    return _page(request, {**_shown(claim, user, ""), "done": decision_sentence(
        claim.approval, changes, user)})


def _shown(claim: LinkClaim, user: Any, refusal: str) -> dict[str, Any]:
    a = claim.approval
    args = a.approved_args if a.version > 1 and a.approved_args is not None else a.proposed_args
    confirm = claim.verb == "approve" and approval_needs_confirmation(a)
    votes = approval_votes([a]).get(a.pk, [])
    return {"a": a, "verb": claim.verb, "title": _TITLES[claim.verb], "recipient": user,
            "args_json": json.dumps(args, indent=2, sort_keys=True, ensure_ascii=False,
                                    default=str),
            "confirm": confirmation_prompt(a) if confirm else "", "refusal": refusal,
            "votes": votes, "counted": sum(1 for v in votes if v["counts"] and v["approve"])}


def _page(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    refusal = context.get("refusal", "")
    if refusal:
        refusal = refusal[0].upper() + refusal[1:]
        context["refusal"] = refusal if refusal.endswith((".", "!", "?")) else refusal + "."
    return render(request, "approvals/decision_link.html",
                  {**context, "perm": perms(request.user)}, status=status)


@csrf_exempt  # Slack cannot send a CSRF token; the request signature authenticates it
@require_POST
def slack_interactions(request: HttpRequest) -> HttpResponse:
    """Verify a Slack-compatible button press, decide through the approval actions, answer."""
    try:
        slack_verify(body=request.body, timestamp=request.headers.get(
            "X-Slack-Request-Timestamp", ""), signature=request.headers.get(
            "X-Slack-Signature", ""))
    except ConfigError as exc:
        return JsonResponse({"error": exc.message}, status=503)
    except LinkRefused as exc:
        return JsonResponse({"error": exc.message}, status=401)
    try:
        press = slack_press_read(payload=request.POST.get("payload", ""),
                                 signature=request.headers["X-Slack-Signature"])
        decided, text = slack_decide(press)
    except PermissionDenied as exc:
        return _slack_reply(str(exc), replace=False)
    except AgentOpsError as exc:
        return _slack_reply(exc.message, replace=False)
    return _slack_reply(text, replace=decided)


def _slack_reply(text: str, *, replace: bool) -> JsonResponse:
    # A decision replaces the message for everyone; a refusal answers only the presser.
    body: dict[str, Any] = {"replace_original": replace, "text": text}
    if not replace:
        body["response_type"] = "ephemeral"
    return JsonResponse(body)
