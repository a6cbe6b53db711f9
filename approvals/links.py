"""Signed, single-use, expiring decision links carried by approval messages (email, Slack).

A link names one approval, one recipient, one verb (approve or reject) and the approval's
version: a hash of the exact arguments to approve and ``Approval.version``. It is signed
with ``SECRET_KEY`` (django.core.signing, its own salt) and carries its signing time, so it
expires after ``AGENTOPS_DECISION_LINK_MAX_AGE_S``. The approve and reject links of one
message share a nonce: whichever is used first consumes it (``UsedDecisionLink``, unique),
so a message decides once. The "open in console" link carries no token: the console asks
the person to sign in.
"""
from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from approvals.errors import LinkExpired, LinkInvalid, LinkOutdated, LinkUsed, LinkWrongUser
from approvals.models import Approval, UsedDecisionLink

_SALT = "agentops.approvals.decision-link"
LINK_VERBS = ("approve", "reject")


@dataclass(frozen=True)
class ApprovalLinks:
    """The URLs one approval message carries for one recipient, and its Slack button values.

    ``approve_value`` / ``reject_value`` go in a Slack-compatible button's ``value``; the
    interaction endpoint acts as the Slack user who pressed (approvals.slack).
    """

    approve_url: str
    reject_url: str
    open_url: str
    approve_value: str
    reject_value: str


@dataclass(frozen=True)
class LinkClaim:
    """What a verified link says: which approval, for whom, which verb, which nonce."""

    approval: Approval
    recipient: Any
    verb: str
    nonce: str


def approval_fingerprint(approval: Approval) -> str:
    """Return the hash of what a decision on ``approval`` decides (its version and arguments)."""
    args = approval.approved_args if approval.approved_args is not None \
        else approval.proposed_args
    text = json.dumps({"v": approval.version, "args": args}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def site_url(path: str) -> str:
    """Return ``path`` as an absolute URL on this site (``AGENTOPS_SITE_URL``)."""
    return settings.AGENTOPS_SITE_URL.rstrip("/") + path


def approval_links(*, approval: Approval, recipient: Any) -> ApprovalLinks:
    """Return the signed approve / reject links and the console link for ``recipient``."""
    nonce = secrets.token_urlsafe(16)
    fingerprint = approval_fingerprint(approval)
    base = {"a": approval.pk, "u": recipient.pk, "f": fingerprint, "n": nonce}
    urls = {verb: site_url(reverse("console:decision_link", kwargs={
        "token": signing.dumps({**base, "x": verb}, salt=_SALT, compress=True)}))
        for verb in LINK_VERBS}
    open_url = site_url(reverse("console:inbox") + f"?focus={approval.pk}")
    return ApprovalLinks(approve_url=urls["approve"], reject_url=urls["reject"],
                         open_url=open_url,
                         approve_value=f"approve:{approval.pk}:{fingerprint}",
                         reject_value=f"reject:{approval.pk}:{fingerprint}")


def link_read(token: str) -> LinkClaim:
    """Return what ``token`` claims, or raise why it may not act (nothing is consumed).

    Raises LinkInvalid (bad signature, unknown approval or user), LinkExpired (older than
    ``AGENTOPS_DECISION_LINK_MAX_AGE_S``), LinkUsed (acted on already) and LinkOutdated
    (the arguments changed since it was sent).
    """
    try:
        data = signing.loads(token, salt=_SALT,
                             max_age=settings.AGENTOPS_DECISION_LINK_MAX_AGE_S)
    except signing.SignatureExpired:
        raise LinkExpired("this link has expired (links work for "
                          f"{_hours(settings.AGENTOPS_DECISION_LINK_MAX_AGE_S)}); open the "
                          "approval in the console to decide it") from None
    except signing.BadSignature:
        raise LinkInvalid("this link is not valid: it was altered, cut short, or made for "
                          "another site; nothing was decided") from None
    approval = Approval.objects.select_related("run", "tool_call").filter(pk=data.get("a")).first()
    recipient = get_user_model().objects.filter(pk=data.get("u"), is_active=True).first()
    if approval is None or recipient is None or data.get("x") not in LINK_VERBS:
        raise LinkInvalid("this link names an approval or a person that no longer exists; "
                          "nothing was decided")
    used = UsedDecisionLink.objects.filter(nonce=data["n"]).first()
    if used is not None:
        raise LinkUsed(f"this link was already used on {used.used_at:%Y-%m-%d %H:%M} UTC "
                       f"({used.action}); each link decides once", used_at=used.used_at)
    if data.get("f") != approval_fingerprint(approval):
        raise LinkOutdated("the arguments of this approval changed after this link was sent "
                           "(it would decide other arguments than the ones you saw); open "
                           "the approval in the console to see the current ones")
    return LinkClaim(approval=approval, recipient=recipient, verb=data["x"], nonce=data["n"])


def link_actor(claim: LinkClaim, signed_in: Any) -> Any:
    """Return who acts through the link: its recipient, when nobody or they are signed in.

    Raises LinkWrongUser when someone else is signed in (a forwarded message stays theirs).
    """
    if getattr(signed_in, "is_authenticated", False) and signed_in.pk != claim.recipient.pk:
        raise LinkWrongUser(f"this link was sent to {claim.recipient.get_username()}, and you "
                            f"are signed in as {signed_in.get_username()}; it acts only for "
                            "the person it was sent to, so nothing was decided")
    return claim.recipient


def link_consume(*, nonce: str, approval: Approval, user: Any, action: str,
                 used: str = "this link was already used; each link decides once",
                 ) -> UsedDecisionLink:
    """Record ``nonce`` as used; LinkUsed saying ``used`` when it was (insert-or-conflict)."""
    try:
        with transaction.atomic():
            return UsedDecisionLink.objects.create(nonce=nonce, approval=approval, user=user,
                                                   action=action)
    except IntegrityError:
        raise LinkUsed(used) from None


def link_release(used: UsedDecisionLink) -> None:
    """Forget a use whose decision was refused (nothing decided), so the link works again."""
    UsedDecisionLink.objects.filter(pk=used.pk).delete()


def _hours(seconds: int) -> str:
    hours = seconds / 3600
    return f"{hours:g} hours" if hours >= 1 else f"{seconds // 60} minutes"
