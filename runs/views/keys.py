"""The API keys page: your keys with team, role, expiry and last use; create, rotate, revoke."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from agentops import clock
from approvals.apikeys import (ApiKeyNotFound, BadKeyInput, KeyOutranksOwner, apikey_create,
                               apikey_list, apikey_revoke, apikey_rotate)
from approvals.forms import ApiKeyForm, RotateForm
from runs.views._common import page, role_required


@require_http_methods(["GET", "POST"])
@role_required()
def api_keys(request: HttpRequest) -> HttpResponse:
    """List your keys; create one and show its secret this once."""
    form = ApiKeyForm(request.POST or None, user=request.user)
    shown = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        days = data["expires_days"]
        try:
            key, raw = apikey_create(
                user=request.user, name=data["name"], team=data["team"], role=data["role"],
                expires_at=clock.now() + dt.timedelta(days=days) if days else None)
        except (KeyOutranksOwner, BadKeyInput) as exc:
            form.add_error("role" if isinstance(exc, KeyOutranksOwner) else None, exc.message)
        else:
            shown = {"key": key, "raw": raw, "verb": "created"}
            form = ApiKeyForm(user=request.user)
    status = 422 if request.method == "POST" and shown is None else 200
    return _page(request, form=form, shown=shown, status=status)


@require_POST
@role_required()
def api_key_rotate(request: HttpRequest, key_id: int) -> HttpResponse:
    """Give a key a new secret (shown this once); the old one stops now or after a grace."""
    form = RotateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose when the old secret stops.")
        return redirect("console:api_keys")
    try:
        key, raw = apikey_rotate(user=request.user, key_id=key_id,
                                 grace_s=form.cleaned_data["grace_s"])
    except ApiKeyNotFound as exc:
        raise Http404(exc.message) from exc
    return _page(request, form=ApiKeyForm(user=request.user),
                 shown={"key": key, "raw": raw, "verb": "rotated"})


@require_POST
@role_required()
def api_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    """Revoke one of your keys; calls with it fail from now on."""
    try:
        key = apikey_revoke(user=request.user, key_id=key_id)
    except ApiKeyNotFound as exc:
        raise Http404(exc.message) from exc
    messages.success(request, f"Key {key.name} ({key.prefix}…) revoked.")
    return redirect("console:api_keys")


def _page(request: HttpRequest, *, form: ApiKeyForm, shown: dict[str, Any] | None,
          status: int = 200) -> HttpResponse:
    return page(request, "keys/index.html", {
        "keys": apikey_list(user=request.user)[:200], "form": form, "shown": shown,
        "rotate": RotateForm(), "now": clock.now()}, status=status)
