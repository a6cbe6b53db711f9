"""Decisions from outside the console: a signed link in a message, a Slack button press.

Both act through the very approval actions the console uses (approvals.actions.approve /
reject: the role check, self-approval, the two-person rule, the staleness check and the
Intervention row), with the channel (``email_link``, ``slack``) in the audit data.
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from agentops.errors import AgentOpsError
from approvals.actions import APPROVAL_ACTIONS
from approvals.confirmation import (approval_needs_confirmation, confirmation_check,
                                    confirmation_prompt)
from approvals.links import LinkClaim, approval_links, link_consume, link_release
from approvals.models import Approval
from approvals.slack import SlackPress


def link_decide(*, claim: LinkClaim, user: Any, reason: str, confirm: str) -> dict[str, Any]:
    """Decide the approval a verified link names, as ``user``, consuming the link.

    A refused decision (role, state, confirmation) releases the link: nothing was decided.
    """
    approval = claim.approval
    if claim.verb == "approve":
        confirmation_check(approval, confirm)
    used = link_consume(nonce=claim.nonce, approval=approval, user=user, action=claim.verb)
    try:
        return APPROVAL_ACTIONS[claim.verb].execute(user, approval, reason,
                                                    channel="email_link")
    except (PermissionDenied, AgentOpsError):
        link_release(used)
        raise


def slack_decide(press: SlackPress) -> tuple[bool, str]:
    """Act on a verified press; return (decided, the message to answer with).

    A reject needs a reason and a high-risk approval its typed amount, which a button cannot
    carry: the answer is then the presser's own signed link to finish on the page.
    """
    approval = press.approval
    needs_page = press.verb == "reject" or approval_needs_confirmation(approval)
    if needs_page:
        links = approval_links(approval=approval, recipient=press.user)
        url = links.reject_url if press.verb == "reject" else links.approve_url
        why = ("a rejection needs a reason (the agent reads it)" if press.verb == "reject"
               else f"this approval is high-risk: {confirmation_prompt(approval)}")
        return False, f"{why}. Nothing is decided yet; finish here: {url}"
    changes = APPROVAL_ACTIONS["approve"].execute(press.user, approval, "", channel="slack")
    return True, decision_sentence(approval, changes, press.user)


def decision_sentence(approval: Approval, changes: dict[str, Any], user: Any) -> str:
    """Return what a decision did, in one sentence ("1 of 2 approvals" while more are needed)."""
    who = user.get_username()
    status = changes.get("status")
    if status == "rejected":
        return f"{approval.tool}: rejected by {who}; the agent reads the reason."
    if status == "pending":
        return (f"{approval.tool}: approved by {who}: {changes.get('approvals')} of "
                f"{changes.get('required')} approvals; another person must approve before "
                "it runs.")
    return f"{approval.tool}: approved by {who}; the call runs now."
