"""Template filters of the console: compact ages, money, JSON shown as (escaped) text."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import urlencode

from django import template
from django.utils.html import format_html

from agentops import clock
from agentops.causes import cause_parse, cause_seq
from runs.selectors import COUNT_CAP
from approvals.recommend.advice import label_of
from approvals.statuses import APPROVAL_LABELS, EXPIRY_LABELS
from ledger.statuses import TOOLCALL_LABELS
from runs.event_types import EVENT_LABELS
from runs.statuses import REASON_LABELS, RUN_STATUS_LABELS, WAIT_LABELS

register = template.Library()


_ROOT_WORDS = {"start": "run start", "action": "operator action", "recovery": "recovery",
               "signal": "signal"}


@register.filter
def cause_label(cause: str) -> str:
    """Return an event's cause in a few words: "after #12", "operator action", "why?"."""
    seq = cause_seq(cause)
    if seq is not None:
        return f"after #{seq}"
    kind, _ = cause_parse(cause)
    return _ROOT_WORDS.get(kind, kind or "why?")


@register.filter
def age(value: dt.datetime | None) -> str:
    """Return how long ago ``value`` was, compactly: 45s, 12m, 3h, 2d."""
    if not value:
        return ""
    seconds = max((clock.now() - value).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


@register.filter
def when(value: dt.datetime | None, style: str = "") -> str:
    """Render ``<time>``: relative text ("3m ago"; ``style="short"`` drops "ago"; a future
    time reads "in 4m 10s") with the absolute UTC time as its title and machine-readable
    datetime."""
    if not value:
        return ""
    left = (value - clock.now()).total_seconds()
    if left >= 1:
        text = f"in {remaining(left)}"
    else:
        text = age(value) if style == "short" else f"{age(value)} ago"
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(),
                       absolute(value), text)


@register.filter
def utc_time(value: dt.datetime | None) -> str:
    """Return ``value`` as absolute UTC text (for places a ``<time>`` cannot go: options)."""
    return absolute(value) if value else ""


def absolute(value: dt.datetime) -> str:
    """Return ``value`` as an absolute UTC time: 2026-11-30 16:48:10 UTC."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def remaining(seconds: float) -> str:
    """Return a time left compactly, as console.js counts it down: 2d 3h, 1h 5m, 13m 48s."""
    s = int(max(seconds, 0))
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s % 60}s"


@register.simple_tag
def countdown(when: dt.datetime | None, prefix: str = "in", past: str = "now") -> str:
    """Render ``<time>`` counting down to ``when`` ("expires in 13m 48s"; ``past`` once due),
    with the absolute UTC time on hover; console.js keeps it counting every second."""
    if not when:
        return ""
    left = (when - clock.now()).total_seconds()
    text = f"{prefix} {remaining(left)}" if left > 0 else past
    return format_html('<time datetime="{}" data-countdown data-prefix="{}" data-past="{}" '
                       'title="{}">{}</time>', when.isoformat(), prefix, past, absolute(when),
                       text)


@register.filter
def usd(micros: int | None) -> str:
    """Return micro-dollars as dollars."""
    return "—" if micros is None else f"${micros / 1_000_000:,.4f}"


@register.filter
def pretty_json(value: Any) -> str:
    """Return ``value`` as indented JSON text; autoescaping still applies where it is shown."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def percent(done: int, total: int) -> int:
    """Return done/total as a whole percentage."""
    return int(100 * done / total) if total else 0


@register.simple_tag
def qs(params: dict[str, Any], **extra: Any) -> str:
    """Return ``params`` updated by ``extra`` as a query string (empty values dropped)."""
    merged = {**params, **extra}
    return urlencode({k: v for k, v in merged.items() if v not in ("", None)})


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    """Return ``mapping[key]`` (None when missing)."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def countfmt(n: int | None) -> str:
    """Return a tab count, "10k+" past the cap."""
    n = n or 0
    return f"{COUNT_CAP // 1000}k+" if n > COUNT_CAP else f"{n:,}"


@register.filter
def words(value: str) -> str:
    """Return an identifier as words: confirm_not_executed -> confirm not executed."""
    return str(value or "").replace("_", " ")


@register.filter
def action_label(verb: str) -> str:
    """Return the console button label of an action verb ("retry" -> "Retry step")."""
    return label_of(verb) if verb else ""


def _label_tables() -> dict[str, dict[str, str]]:
    return {"run": RUN_STATUS_LABELS, "reason": REASON_LABELS, "wait": WAIT_LABELS,
            "event": EVENT_LABELS, "call": TOOLCALL_LABELS, "approval": APPROVAL_LABELS,
            "expiry": EXPIRY_LABELS}


@register.filter
def label(value: str | None, kind: str = "run") -> str:
    """Return the human label of an enum value (``kind``: run, reason, wait, event, call,
    approval, expiry; action verbs use ``action_label``) from the table next to its enum; an undeclared value reads as
    words (``some_value`` -> "some value") rather than failing the page."""
    text = str(value or "")
    table = _label_tables().get(kind or "run", {})
    return table.get(text) or words(text)



@register.filter
def absolute_utc(value: dt.datetime | None) -> str:
    """Return ``value`` as an absolute UTC time (``absolute``), empty for None."""
    return absolute(value) if value else ""
