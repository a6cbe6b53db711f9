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

from agentops.errors import AgentOpsError, InvalidInput
from approvals.actions import RUN_ACTIONS
from approvals.actions.base import Action
from approvals.actions.params import params_fields, params_from_form, plan_lines
from approvals.confirmation import Typed
from approvals.forms import ReasonForm, reason_error
from approvals.roles import can_operate, can_see_results
from ledger.artifacts import artifact_read
from ledger.secrets import run_secrets
from runs import selectors as sel
from runs.outlook import action_outlook
from runs.rollback_points import RollbackPoint, rollback_points
from runs.scope import visible_teams
from runs.statuses import is_stuck
from runs.triage import run_next_stuck
from runs.views import _dispatch
from runs.views._common import int_or_none, page, role_required
from runs.views.detail import _detail
from agentops.agents import registry
from runs.engine.core.context import context_build
from runs.engine.runtime.snapshots import load_state
from runs.services import run_fork as run_fork_service


def _preview_params(action: Action, request: HttpRequest, run: Any,
                    points: list[RollbackPoint]) -> dict[str, Any]:
    """Return the checkpoint picked so far (the preview depends on it), if the action has
    one; the newest rollback point (before the current step) until one is picked; and the
    choices picked so far (what a rollback does then changes what its preview says)."""
    chosen: dict[str, Any] = {}
    data = request.POST if request.method == "POST" else request.GET
    for f in params_fields(action.params):
        if f.widget == "checkpoint":
            seq = data.get(f.name) or ""
            default = action.default_to_seq(run, points)  # type: ignore[attr-defined]
            if seq.isdigit():
                chosen[f.name] = int(seq)
            elif default is not None:
                chosen[f.name] = default
        elif f.widget == "choice":
            picked = [v for v in data.getlist(f.name) if v in f.choices]
            if picked:
                chosen[f.name] = picked[0]
        elif f.widget == "plan" and (data.get(f.name) or "").strip():
            chosen[f.name] = plan_lines(data[f.name])  # the diff shows the edit typed so far
    return chosen


def _fields(action: Action, run: Any) -> list[dict[str, Any]]:
    texts = action.form_initial(run)
    return [{"f": f, "initial": texts.get(f.name, _initial(run, f.initial))}
            for f in params_fields(action.params)]


def _initial(run: Any, name: str) -> Any:
    value = getattr(run, name, None) if name else None
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _typed_so_far(request: HttpRequest, fields: list[dict[str, Any]]) -> dict[str, str]:
    """Return what was typed before the dialog re-rendered (a new checkpoint, a plan preview)."""
    if request.method != "GET":
        return {}
    names = ["reason", *(x["f"].name for x in fields if x["f"].widget in ("plan", "json"))]
    return {n: request.GET[n][:8000] for n in names if request.GET.get(n)}


def _typed(action: Action, run: Any, params: dict[str, Any]) -> Typed | None:
    """Return what the person must type to confirm (the word, or the amount it moves)."""
    try:
        return action.confirmation(run, **params)
    except AgentOpsError:
        # The checkpoint cannot be rolled back to (the dialog says why): the word confirms.
        return action.confirmation(None)


def _confirm_context(request: HttpRequest, detail: sel.RunDetail, action: Action) -> dict[str, Any]:
    run, verb = detail.run, action.verb
    fields = _fields(action, run)
    checkpoint = any(x["f"].widget == "checkpoint" for x in fields)
    points = rollback_points(run=run) if checkpoint else []
    chosen = _preview_params(action, request, run, points)
    context = {"run": run, "d": detail, "action": action, "verb": verb,
               "verb_label": action.label, "verb_help": action.help,
               "recommended": run.recommended_action == verb, "fields": fields,
               "ticks_name": next((x["f"].name for x in fields if x["f"].widget == "ticks"), ""),
               "points": points, "confirm_rule": _typed(action, run, chosen),
               "seen_seq": run.last_seq, "errors": [],
               # Picking another checkpoint re-renders the dialog: what was typed stays.
               "form_data": _typed_so_far(request, fields),
               "stuck": is_stuck(run.status),
               "then_next": (request.POST if request.method == "POST" else request.GET
                             ).get("then") == "next",
               "checkpoint": chosen.get("to_seq"), "chosen": chosen, "rerun": [],
               "outlook": None, "diff": [], "hint": action.form_hint(run)}
    try:
        context["rerun"] = _dispatch.preview(verb, run=run, user=request.user, **chosen)
        context["diff"] = action.diff(run, **chosen)
        if verb in ("skip", "rollback", "rollback_terminate"):
            context["outlook"] = action_outlook(run=run, verb=verb, to_seq=chosen.get("to_seq"))
    except AgentOpsError as exc:
        # No checkpoint to roll back to, or one in the middle of a call: say so in the dialog.
        context["errors"].append(exc.message)
    return context


@require_http_methods(["GET", "POST"])
@role_required(can_operate)
def run_action(request: HttpRequest, run_id: Any, verb: str) -> HttpResponse:
    """Show the confirm step of ``verb`` (GET) or perform it with a reason (POST)."""
    action = RUN_ACTIONS.get(verb)
    if action is None:
        raise Http404("no such action")
    detail = _detail(request, run_id)
    refusal = action.refusal(request.user, detail.run)
    if refusal:
        stale = _stale(request, detail.run, action)
        if stale is not None:
            return stale
        raise PermissionDenied(f"{action.label} is not available on this run for you: {refusal}")
    context = _confirm_context(request, detail, action)
    if request.method == "GET":
        return page(request, "runs/confirm.html", context, partial="form",
                    team=detail.run.team_id)
    return _perform(request, detail, action, context)


def _stale(request: HttpRequest, run: Any, action: Action) -> HttpResponse | None:
    """Answer a dialog posted against a run that changed meanwhile: who did what, and reload."""
    seen = int_or_none(request.POST.get("seen_seq")) if request.method == "POST" else None
    if seen is None or seen == run.last_seq or not can_operate(request.user, run.team_id):
        return None
    note = sel.run_change_note(run=run, since_seq=seen)
    context = {"run": run, "verb": action.verb, "verb_label": action.label, "note": note,
               "stale": True}
    return page(request, "runs/confirm.html", context, partial="stale", status=409)


def _perform(request: HttpRequest, detail: sel.RunDetail, action: Action,
             context: dict[str, Any]) -> HttpResponse:
    run, form, verb = detail.run, ReasonForm(request.POST), action.verb
    context["form_data"] = request.POST
    # What was ticked stays ticked when the form comes back with an error.
    context["ticked"] = request.POST.getlist(context["ticks_name"]) if context["ticks_name"] \
        else []
    try:
        params = params_from_form(verb, action.params, request.POST)
    except InvalidInput as exc:
        context["errors"].append(f"Check the extra fields: {exc.message}")
        params = {}
    if not form.is_valid():
        context["errors"].append(reason_error(form))
    elif form.cleaned_data.get("seen_seq") not in (None, run.last_seq):
        # Someone acted (or the engine moved on) while this person read the page.
        note = sel.run_change_note(run=run, since_seq=form.cleaned_data["seen_seq"])
        context["errors"].append(f"This run changed while you were reading: {note or 'event #'}"
                                 f"{'' if note else form.cleaned_data['seen_seq']}. "
                                 "Review it and confirm again.")
        context["changed"] = True
    if context["errors"]:
        return page(request, "runs/confirm.html", context, partial="form", status=409
                    if context.get("changed") else 422)
    seen = (run.pk, run.updated_at)  # the queue position as the operator saw it
    outcome = _dispatch.perform(verb, run=run, user=request.user,
                                reason=form.cleaned_data["reason"],
                                confirm=request.POST.get("confirm", "")[:100], **params)
    if not outcome.ok:
        context["errors"].append(outcome.error)
        return page(request, "runs/confirm.html", context, partial="form", status=outcome.status)
    messages.success(request, f"{action.label}: done.")
    url = _next_url(request, context, seen=seen)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _next_url(request: HttpRequest, context: dict[str, Any], *, seen: tuple[Any, Any]) -> str:
    """Return where the operator goes after acting: this run, or (decide-and-next) the next."""
    run_id, updated_at = seen
    if not context["then_next"]:
        return reverse("console:run", args=[run_id])
    following = run_next_stuck(after_id=run_id, after_updated_at=updated_at,
                               teams=visible_teams(request.user))
    if following is None:
        messages.info(request, "No stuck runs are left.")
        return reverse("console:queue")
    messages.info(request, f"Next stuck run: {str(following.pk)[:8]}.")
    return reverse("console:run", args=[following.pk])


@require_POST
@role_required(can_operate)
def run_fork(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Start a new run from a snapshot of this one."""
    run = _detail(request, run_id).run
    if not can_operate(request.user, run.team_id):
        raise PermissionDenied("Your role in this run's team does not allow forking it.")
    try:
        seq = int(request.POST.get("seq", ""))
    except ValueError:
        return HttpResponseBadRequest("seq must be an event number")
    try:
        child = run_fork_service(run=run, seq=seq, actor=request.user)
    except AgentOpsError as exc:
        messages.error(request, exc.message)
        return redirect("console:run", run_id=run.pk)
    messages.success(request, f"Forked from event #{seq}.")
    return redirect("console:run", run_id=child.pk)


@require_GET
@role_required(can_see_results)  # the API's rule: full results are for operators and support
def run_artifact(request: HttpRequest, run_id: Any, sha256: str) -> HttpResponse:
    """Serve a tool call's output or log as plain text (scrubbed), never as HTML."""
    run = _detail(request, run_id).run
    if not can_see_results(request.user, run.team_id):
        raise PermissionDenied("Your role in this run's team does not allow reading results.")
    if not sel.artifact_belongs_to_run(run=run, sha256=sha256):
        raise Http404("no such artifact on this run")
    body = run_secrets(run_id).scrub_bytes(artifact_read(sha256))
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_GET
@role_required()
def run_context(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show the messages the model would see if the run resumed now."""
    run = _detail(request, run_id).run
    try:
        messages_ = context_build(load_state(run), registry.get(run.agent_name,
                                                                   run.agent_version))
        error = ""
    except AgentOpsError as exc:
        messages_, error = [], exc.message
    return page(request, "runs/detail.html", {"run": run, "context_messages": messages_,
                                              "context_error": error},
                partial="context", always_partial=True, team=run.team_id)
