"""Operator actions on one run: a confirm step (GET) and the action itself (POST)."""
from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from approvals.forms import ReasonForm
from approvals.roles import can_operate
from ledger.artifacts import artifact_read
from runs import selectors as sel
from runs.views import _dispatch
from runs.views._common import page, role_required
from runs.views.detail import VERB_LABELS, _detail, run_verbs

VERB_HELP = {
    "retry": "Resume from the last clean checkpoint before the failed step, with a fresh "
             "retry budget for that step.",
    "skip": "Mark the current step skipped (optionally with output facts) and continue.",
    "rollback": "Compensate reversible side effects since the chosen checkpoint, list the "
                "irreversible ones for you to handle, then restore to that checkpoint.",
    "terminate": "Cancel the run. Nothing new starts; an in-flight tool is told to stop.",
    "confirm_executed": "Record that the tool call did happen (add evidence); the run continues "
                        "with that outcome.",
    "confirm_not_executed": "Record that the tool call did not happen; it is retried with the "
                            "same idempotency key.",
    "resume": "Continue the run (after its budget was raised).",
    "raise_budget": "Raise this run's limits, then resume it.",
}
_PARAMS = {"rollback": ("to_seq", "ticked"), "skip": ("output",), "confirm_executed": ("evidence",),
           "raise_budget": ("tokens", "cost_micros", "model_calls", "tool_calls")}


def _params(verb: str, data: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _PARAMS.get(verb, ()):
        if name == "ticked":
            out[name] = [t[:40] for t in data.getlist(name)]
            continue
        raw = (data.get(name) or "").strip()
        if not raw:
            continue
        if name == "output":
            out[name] = json.loads(raw)
        elif name in {"evidence"}:
            out[name] = raw[:4000]
        else:
            out[name] = int(raw)
    return out


def _preview_params(verb: str, request: HttpRequest) -> dict[str, Any]:
    seq = request.POST.get("to_seq") or request.GET.get("to_seq")
    return {"to_seq": int(seq)} if verb == "rollback" and (seq or "").isdigit() else {}


def _confirm_context(request: HttpRequest, detail: sel.RunDetail, verb: str) -> dict[str, Any]:
    run = detail.run
    return {"run": run, "d": detail, "verb": verb, "verb_label": VERB_LABELS[verb],
            "verb_help": VERB_HELP[verb], "recommended": run.recommended_action == verb,
            "rerun": _dispatch.preview(verb, run=run, user=request.user,
                                       **_preview_params(verb, request)),
            "snapshots": sel.snapshots_for_run(run_id=run.pk) if verb == "rollback" else [],
            "seen_seq": run.last_seq, "errors": [], "form_data": {},
            "to_seq": _preview_params(verb, request).get("to_seq")}


@require_http_methods(["GET", "POST"])
@role_required(can_operate)
def run_action(request: HttpRequest, run_id: Any, verb: str) -> HttpResponse:
    """Show the confirm step of ``verb`` (GET) or perform it with a reason (POST)."""
    if verb not in _dispatch.RUN_VERBS:
        raise Http404("no such action")
    detail = _detail(run_id)
    if verb not in run_verbs(detail.run, request.user):
        raise PermissionDenied(f"{VERB_LABELS[verb]} is not available on this run for you.")
    context = _confirm_context(request, detail, verb)
    if request.method == "GET":
        return page(request, "runs/confirm.html", context, partial="form")
    return _perform(request, detail, verb, context)


def _perform(request: HttpRequest, detail: sel.RunDetail, verb: str,
             context: dict[str, Any]) -> HttpResponse:
    run, form = detail.run, ReasonForm(request.POST)
    context["form_data"] = request.POST
    try:
        params = _params(verb, request.POST)
    except (ValueError, json.JSONDecodeError):
        context["errors"].append("Check the extra fields: numbers must be whole numbers and "
                                 "output must be JSON.")
        params = {}
    if not form.is_valid():
        context["errors"].append("A reason is required.")
    elif form.cleaned_data.get("seen_seq") not in (None, run.last_seq):
        # Someone acted (or the engine moved on) while this person read the page.
        context["errors"].append(f"This run changed while you were reading (event "
                                 f"#{form.cleaned_data['seen_seq']} → #{run.last_seq}). "
                                 "Review it and confirm again.")
        context["changed"] = True
    if context["errors"]:
        return page(request, "runs/confirm.html", context, partial="form", status=409
                    if context.get("changed") else 422)
    outcome = _dispatch.perform(verb, run=run, user=request.user,
                                reason=form.cleaned_data["reason"], **params)
    if not outcome.ok:
        context["errors"].append(outcome.error)
        return page(request, "runs/confirm.html", context, partial="form", status=outcome.status)
    messages.success(request, f"{VERB_LABELS[verb]}: done.")
    url = reverse("console:run", args=[run.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@role_required(can_operate)
def run_fork(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Start a new run from a snapshot of this one."""
    run = _detail(run_id).run
    try:
        seq = int(request.POST.get("seq", ""))
    except ValueError:
        return HttpResponseBadRequest("seq must be an event number")
    try:
        from runs.services import run_fork as service
    except ImportError:
        messages.error(request, "Forking is not available yet.")
        return redirect("console:run", run_id=run.pk)
    from agentops.errors import AgentOpsError

    try:
        child = service(run=run, seq=seq, actor=request.user)
    except AgentOpsError as exc:
        messages.error(request, exc.message)
        return redirect("console:run", run_id=run.pk)
    messages.success(request, f"Forked from event #{seq}.")
    return redirect("console:run", run_id=child.pk)


@require_GET
@role_required()
def run_artifact(request: HttpRequest, run_id: Any, sha256: str) -> HttpResponse:
    """Serve a tool call's output or log as plain text, never as HTML."""
    if not sel.artifact_belongs_to_run(run_id=run_id, sha256=sha256):
        raise Http404("no such artifact on this run")
    body = artifact_read(sha256)
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_GET
@role_required()
def run_context(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show the messages the model would see if the run resumed now."""
    run = _detail(run_id).run
    from agentops.agents import registry
    from agentops.errors import AgentOpsError
    from runs.engine.context import context_build
    from runs.engine.snapshots import load_state

    try:
        messages_ = context_build(load_state(run.pk), registry.get(run.agent_name,
                                                                   run.agent_version))
        error = ""
    except AgentOpsError as exc:
        messages_, error = [], exc.message
    return page(request, "runs/detail.html", {"run": run, "context_messages": messages_,
                                              "context_error": error},
                partial="context", always_partial=True)
