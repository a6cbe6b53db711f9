"""REST endpoints of approvals and of the caller's own API keys."""
from __future__ import annotations

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from agentops import api_auth
from approvals import api_selectors as sel
from approvals.actions import APPROVAL_ACTIONS
from approvals.confirmation import confirmation_check
from runs.models import Team
from approvals.apikeys import (BadKeyInput, apikey_create, apikey_list, apikey_revoke,
                               apikey_rotate)
from approvals.schemas import (
    ApiKeyCreatedOut,
    ApiKeyIn,
    ApiKeyOut,
    ApiKeyRotateIn,
    ApprovalFiltersIn,
    ApprovalOut,
    ApprovalPageOut,
    DecisionIn,
)

router = Router(tags=["approvals"])
keys_router = Router(tags=["api keys"])


@router.get("", response=ApprovalPageOut, summary="List approvals")
def list_approvals(request: HttpRequest, filters: Query[ApprovalFiltersIn], cursor: str = "",
                   limit: int = Query(50, ge=1, le=200)) -> dict:
    """List approvals newest first, filtered by status, run or tool."""
    api_auth.viewer(request)
    rows, next_cursor = sel.approval_list_page(
        status=str(filters.status or ""), run_id=filters.run_id, tool=filters.tool,
        cursor=cursor, limit=limit,
    )
    return {"items": rows, "next_cursor": next_cursor}


@router.get("/{approval_id}", response=ApprovalOut, summary="Get an approval")
def get_approval(request: HttpRequest, approval_id: int = Path(..., ge=1, le=2**62)):
    """Return one approval with the exact arguments it asks about."""
    api_auth.viewer(request)
    return sel.approval_get(approval_id=approval_id)


_VERBS = {"approve": "approve", "reject": "reject", "edit": "edit_args"}


@router.post("/{approval_id}/decide", response=ApprovalOut, summary="Decide an approval")
def decide_approval(request: HttpRequest, body: DecisionIn,
                    approval_id: int = Path(..., ge=1, le=2**62)):
    """Approve, reject (reason required) or approve with edited ``args``."""
    api_auth.viewer(request)  # the action checks the support/admin role itself
    approval = sel.approval_get(approval_id=approval_id)
    if approval is not None and body.decision != "reject":
        confirmation_check(approval, body.confirm,
                           args=body.args if body.decision == "edit" else None)
    params = {"args": body.args} if body.decision == "edit" else {}
    params["channel"] = "api"
    APPROVAL_ACTIONS[_VERBS[body.decision]].execute(request.auth, approval, body.reason,
                                                    **params)
    return sel.approval_get(approval_id=approval_id)


@keys_router.post("", response={201: ApiKeyCreatedOut}, summary="Create an API key")
def create_key(request: HttpRequest, body: ApiKeyIn):
    """Create a key for yourself in a team with a role no higher than yours there.

    The response holds the key, shown only this once. A role above your own is refused
    (422 ``key_outranks_owner``).
    """
    user = api_auth.viewer(request)
    team = Team.objects.filter(slug=body.team).first()
    if team is None:
        raise BadKeyInput(f"no team {body.team!r}", team=body.team)
    key, raw = apikey_create(user=user, name=body.name, team=team, role=body.role,
                             expires_at=body.expires_at)
    key.key = raw
    return Status(201, key)


@keys_router.post("/{key_id}/rotate", response=ApiKeyCreatedOut, summary="Rotate an API key")
def rotate_key(request: HttpRequest, body: ApiKeyRotateIn,
               key_id: int = Path(..., ge=1, le=2**62)):
    """Give one of your keys a new secret (in the response, shown only this once).

    Name, team, role and expiry stay; the old secret stops at once, or after ``grace_s``.
    """
    user = api_auth.viewer(request)
    key, raw = apikey_rotate(user=user, key_id=key_id, grace_s=body.grace_s)
    key.key = raw
    return key


@keys_router.get("", response=list[ApiKeyOut], summary="List your API keys")
def list_keys(request: HttpRequest):
    """Return your keys (prefix and dates, never the secret)."""
    user = api_auth.viewer(request)
    return list(apikey_list(user=user)[:500])


@keys_router.delete("/{key_id}", response=ApiKeyOut, summary="Revoke an API key")
def revoke_key(request: HttpRequest, key_id: int = Path(..., ge=1, le=2**62)):
    """Revoke one of your keys; calls with it fail from now on."""
    user = api_auth.viewer(request)
    return apikey_revoke(user=user, key_id=key_id)
