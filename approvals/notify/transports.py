"""Sending one message on one channel kind: email (Django's mail), Slack-style chat, webhook.

Each returns a short response line for the attempt log or raises DeliveryFailed. They run
outside any transaction, with the channel's timeout (AGENTOPS_NOTIFY_TIMEOUT_S).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import time
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection

from approvals.errors import DeliveryFailed
from approvals.models import Delivery
from approvals.notify.messages import Message

KEY_HEADER = "Idempotency-Key"
SIGNATURE_HEADER = "X-AgentOps-Signature"
TIMESTAMP_HEADER = "X-AgentOps-Timestamp"


def message_id(key: str) -> str:
    """Return the Message-ID of a delivery: the same key, the same id (mail clients dedupe)."""
    return f"<{key[:40]}@agentops.notify>"


def send_email(d: Delivery, msg: Message, decl: dict[str, Any]) -> str:
    """Send ``msg`` to ``d.recipient`` through the configured email backend."""
    mail = EmailMultiAlternatives(subject=msg.subject, body=msg.text(),
                                  from_email=settings.DEFAULT_FROM_EMAIL, to=[d.recipient],
                                  headers={"Message-ID": message_id(d.key),
                                           "X-AgentOps-Delivery": d.key})
    mail.attach_alternative(msg.html(), "text/html")
    try:
        with get_connection(timeout=settings.AGENTOPS_NOTIFY_TIMEOUT_S) as conn:
            sent = conn.send_messages([mail])
    except smtplib.SMTPRecipientsRefused as exc:
        raise DeliveryFailed(f"the mail server refused {d.recipient}: {exc}",
                             retryable=False) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryFailed(f"email to {d.recipient} failed: {exc}") from exc
    if not sent:
        raise DeliveryFailed(f"the email backend sent nothing to {d.recipient}")
    return f"email accepted for {d.recipient}"


def send_slack(d: Delivery, msg: Message, decl: dict[str, Any]) -> str:
    """Post ``msg`` to a Slack-compatible incoming webhook, with one button per link."""
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": label},
                "action_id": action, "value": value, **_button_style(label)}
               for label, action, value in msg.buttons]
    buttons += [{"type": "button", "text": {"type": "plain_text", "text": label},
                 "action_id": "open", "url": url} for label, url in msg.links]
    body = {"text": msg.subject,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                     "text": f"*{msg.subject}*\n" + "\n".join(msg.lines)}},
                       {"type": "actions", "block_id": f"agentops-{d.key[:16]}",
                        "elements": buttons}]}
    return http_post(decl["url"], body, {KEY_HEADER: d.key})


def send_webhook(d: Delivery, msg: Message, decl: dict[str, Any]) -> str:
    """POST the notice as JSON, signed with the channel's secret (HMAC-SHA256)."""
    body = {"id": d.key, "stage": d.stage, "channel": d.channel, "group": d.group_name,
            "subject": msg.subject, "text": msg.text(), **msg.data,
            "links": [{"label": label, "url": url} for label, url in msg.links]}
    raw = json.dumps(body, sort_keys=True).encode()
    stamp = str(int(time.time()))
    return http_post(decl["url"], raw, {KEY_HEADER: d.key, TIMESTAMP_HEADER: stamp,
                                    SIGNATURE_HEADER: signature(decl["secret"], stamp, raw)})


def signature(secret: str, stamp: str, raw: bytes) -> str:
    """Return the signature header value of a webhook body sent at ``stamp``."""
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + raw, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def _button_style(label: str) -> dict[str, str]:
    styles = {"Approve": "primary", "Reject": "danger"}
    return {"style": styles[label]} if label in styles else {}


def http_post(url: str, body: Any, headers: dict[str, str]) -> str:
    """POST JSON ``body`` (or raw bytes); return "HTTP <status>" or raise DeliveryFailed."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=raw, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=settings.AGENTOPS_NOTIFY_TIMEOUT_S) as resp:
            return f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        # 4xx other than 408/429 will not get better by sending the same request again.
        retryable = exc.code >= 500 or exc.code in (408, 429)
        raise DeliveryFailed(f"HTTP {exc.code} from {url}", retryable=retryable) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryFailed(f"POST to {url} failed: {exc}") from exc


SENDERS = {"email": send_email, "slack": send_slack, "webhook": send_webhook}
