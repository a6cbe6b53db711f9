"""Slack-compatible interactions: verify a button press, read it, and find who pressed it.

Slack signs each interaction request: ``X-Slack-Signature`` is ``v0=`` + HMAC-SHA256 of
``v0:{X-Slack-Request-Timestamp}:{raw body}`` with the app's signing secret. A request older
than five minutes (or from the future) is refused, and each signature acts once (its hash is
recorded as a used link nonce), so a captured request cannot be replayed in the window.
The button's ``value`` is ``<verb>:<approval id>:<fingerprint>`` (``approval_links``'s
``approve_value`` / ``reject_value``): a press after the arguments changed is refused.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from agentops import clock
from agentops.errors import ConfigError
from approvals.errors import LinkExpired, LinkInvalid, LinkOutdated
from approvals.links import LINK_VERBS, approval_fingerprint, link_consume
from approvals.models import Approval

REPLAY_WINDOW_S = 5 * 60


@dataclass(frozen=True)
class SlackPress:
    """One verified button press: the approval, the verb and the AgentOps user."""

    approval: Approval
    verb: str
    user: Any
    slack_user: str
    response_url: str


def slack_verify(*, body: bytes, timestamp: str, signature: str) -> None:
    """Raise unless ``body`` is signed by Slack within the replay window (nothing is recorded)."""
    secret = settings.AGENTOPS_SLACK_SIGNING_SECRET
    if not secret:
        raise ConfigError("Slack interactions are off: set AGENTOPS_SLACK_SIGNING_SECRET")
    try:
        age = abs(clock.now().timestamp() - int(timestamp))
    except ValueError:
        raise LinkInvalid("X-Slack-Request-Timestamp is missing or not a number") from None
    if age > REPLAY_WINDOW_S:
        raise LinkExpired(f"the request timestamp is {int(age)} s away from now (more than "
                          f"{REPLAY_WINDOW_S} s): refused as a possible replay")
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature or ""):
        raise LinkInvalid("the X-Slack-Signature does not match this request; nothing was "
                          "decided")


def slack_press_read(*, payload: str, signature: str) -> SlackPress:
    """Return the verified press in ``payload`` and record its signature as used."""
    try:
        data = json.loads(payload)
        action = data["actions"][0]
        verb, approval_id, fingerprint = str(action["value"]).split(":", 2)
        slack_user = data["user"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LinkInvalid("the payload is not a block_actions press of an approval button "
                          "(expected actions[0].value = '<verb>:<approval>:<fingerprint>')"
                          ) from None
    approval = Approval.objects.select_related("run", "tool_call").filter(
        pk=int(approval_id) if approval_id.isdigit() else 0).first()
    if data.get("type") != "block_actions" or verb not in LINK_VERBS or approval is None:
        raise LinkInvalid("the button names no approval this site knows; nothing was decided")
    user = slack_user_map(slack_user)
    link_consume(nonce="slack:" + hashlib.sha256(signature.encode()).hexdigest()[:64],
                 approval=approval, user=user, action=verb,
                 used="this Slack request was already handled (a replay); nothing was decided")
    if fingerprint != approval_fingerprint(approval):
        raise LinkOutdated("the arguments of this approval changed after the message was "
                           "sent; open it in the console to see the current ones")
    return SlackPress(approval=approval, verb=verb, user=user,
                      slack_user=str(slack_user.get("id", "")),
                      response_url=str(data.get("response_url", "")))


def slack_user_map(slack_user: dict[str, Any]) -> Any:
    """Return the AgentOps user behind a Slack user (the configured map, then email)."""
    users = get_user_model().objects.filter(is_active=True)
    name = settings.AGENTOPS_SLACK_USERS.get(str(slack_user.get("id", "")))
    user = users.filter(username=name).first() if name else None
    email = slack_user.get("email") or ""
    if user is None and email:
        user = users.filter(email__iexact=email).first()
    if user is None:
        raise LinkInvalid(f"Slack user {slack_user.get('id', '?')} is not mapped to an "
                          "AgentOps user (AGENTOPS_SLACK_USERS or a matching email); "
                          "nothing was decided")
    return user
