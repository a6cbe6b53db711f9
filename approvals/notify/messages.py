"""What a delivery says: subject, text, HTML and the links, read from the approval or run now."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.urls import reverse
from django.utils.html import escape

from approvals.links import approval_links, site_url
from approvals.models import Delivery
from approvals.statuses import ApprovalStatus, NotifyStage, NotifySubject

_STAGE_PREFIX = {NotifyStage.NOTIFY: "", NotifyStage.REMIND: "Reminder: ",
                 NotifyStage.ESCALATE: "Escalated: "}


@dataclass
class Message:
    """One rendered notice; ``links`` are (label, url) pairs, the console link last.

    ``buttons`` are chat buttons (label, action id, value) the interaction endpoint decides
    by (approvals.slack); emails carry per-recipient signed links instead.
    """

    subject: str
    lines: list[str]
    links: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    buttons: list[tuple[str, str, str]] = field(default_factory=list)

    def text(self) -> str:
        """Return the plain-text body."""
        return "\n".join([*self.lines, "", *(f"{label}: {url}" for label, url in self.links)])

    def html(self) -> str:
        """Return the HTML body (the same lines, the links as links)."""
        body = "".join(f"<p>{escape(line)}</p>" for line in self.lines)
        links = " · ".join(f'<a href="{escape(url)}">{escape(label)}</a>'
                           for label, url in self.links)
        return f"<html><body>{body}<p>{links}</p></body></html>"


def message_for(d: Delivery) -> Message:
    """Return the message ``d`` sends, from the approval or run as it stands now."""
    prefix = _STAGE_PREFIX.get(d.stage, "")
    if d.track.subject == NotifySubject.APPROVAL and d.approval is not None:
        return _approval_message(d, prefix)
    return _stuck_message(d, prefix)


def _approval_message(d: Delivery, prefix: str) -> Message:
    a = d.approval
    run_url = site_url(reverse("console:run", args=[a.run_id]))
    lines = [f"Run {str(a.run_id)[:8]} asks to call {a.tool} (risk {a.risk}).",
             f"Why: {a.why or 'the tool needs approval'}",
             f"Arguments: {json.dumps(a.proposed_args, sort_keys=True)}",
             f"Status: {a.status}; expires {a.expires_at:%Y-%m-%d %H:%M UTC}"
             if a.expires_at else f"Status: {a.status}"]
    if d.group_name:
        lines.append(f"Assigned to: {d.group_name}")
    links, buttons = _decision_links(d, run_url)
    return Message(subject=f"{prefix}Approval needed: {a.tool} on run {str(a.run_id)[:8]}",
                   lines=lines, links=links, buttons=buttons,
                   data={"subject": "approval", "approval": a.pk, "tool": a.tool,
                         "args": a.proposed_args, "risk": a.risk, "status": a.status,
                         "run": str(a.run_id), "url": run_url})


def _stuck_message(d: Delivery, prefix: str) -> Message:
    run = d.run
    run_url = site_url(reverse("console:run", args=[run.pk]))
    reason = run.attention_reason or run.status
    lines = [f"Run {str(run.pk)[:8]} ({run.agent_name}) is {run.status}: {reason}.",
             run.attention_detail or "",
             f"Recommended: {run.recommended_action}" if run.recommended_action else ""]
    if d.group_name:
        lines.append(f"Assigned to: {d.group_name}")
    return Message(subject=f"{prefix}Run {str(run.pk)[:8]} needs a person: {reason}",
                   lines=[line for line in lines if line], links=[("Open in console", run_url)],
                   data={"subject": "stuck", "run": str(run.pk), "status": run.status,
                         "reason": reason, "recommended": run.recommended_action,
                         "url": run_url})


def _decision_links(d: Delivery, run_url: str) -> tuple[list[tuple[str, str]],
                                                       list[tuple[str, str, str]]]:
    """Return the links and chat buttons deciding a pending approval from the message.

    An email to a person carries their own signed single-use approve / reject links; a chat
    message carries buttons whose press says who pressed; a webhook only the console link.
    """
    a = d.approval
    if a.status != ApprovalStatus.PENDING or d.kind == "webhook":
        return [("Open in console", run_url)], []
    if d.user is not None:
        mine = approval_links(approval=a, recipient=d.user)
        return [("Approve", mine.approve_url), ("Reject", mine.reject_url),
                ("Open in console", mine.open_url)], []
    # A chat channel has no one recipient: only the button values are used, never its URLs.
    shared = approval_links(approval=a, recipient=AnonymousUser())
    return [("Open in console", shared.open_url)], [("Approve", "approve", shared.approve_value),
                                                    ("Reject", "reject", shared.reject_value)]
