"""The run list's URL: which parameters it takes, what each may hold, and the clear error for
one that is wrong (a typed URL, an old bookmark, a saved view).

The queue page, the bulk form and saved views all read a query string through
``list_query_parse``, so the three agree on what a filter means.
"""
from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from runs.errors import InvalidListQuery
from runs.statuses import REASON_LABELS

TABS = ("waiting", "blocked", "unknown", "approvals", "running", "succeeded", "exceptions",
        "failed", "cancelled", "all")
DEFAULT_TAB = "blocked"
AGES = {"5m": dt.timedelta(minutes=5), "1h": dt.timedelta(hours=1),
        "1d": dt.timedelta(days=1), "7d": dt.timedelta(days=7)}
FILTER_KEYS = ("agent", "reason", "tool", "age", "q", "sig", "owner", "since", "team")
# Everything a list URL may carry; a saved view keeps all but the cursor (a position).
KEYS = frozenset({"tab", "view", "cursor", *FILTER_KEYS})
MAX_VALUE = 200
_SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")
_SINCE = re.compile(r"^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d)?)?$")


@dataclass
class QueueFilters:
    """The queue filters a URL carries (all optional, all validated strings)."""

    agent: str = ""
    reason: str = ""
    tool: str = ""
    age: str = ""
    q: str = ""
    sig: str = ""
    owner: str = ""
    since: str = ""
    team: str = ""  # a team's slug (only teams the viewer sees match anything)

    def as_params(self) -> dict[str, str]:
        """Return the non-empty filters as GET parameters."""
        return {k: v for k, v in vars(self).items() if v}


@dataclass
class ListQuery:
    """A parsed list URL: the tab, the filters, grouped or not, and the page cursor."""

    tab: str = DEFAULT_TAB
    filters: QueueFilters = field(default_factory=QueueFilters)
    grouped: bool = False
    cursor: str = ""
    errors: list[str] = field(default_factory=list)

    def as_query_string(self) -> str:
        """Return the view as a canonical query string (no cursor: a view is not a position)."""
        params = {"tab": self.tab, **self.filters.as_params()}
        if self.grouped:
            params["view"] = "groups"
        return urlencode(params)


def since_parse(text: str) -> dt.datetime | None:
    """Return ``text`` (2026-11-30 or 2026-11-30T14:00, read as UTC) as a datetime, or None."""
    if not _SINCE.match(text or ""):
        return None
    try:
        value = dt.datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def cursor_parse(cursor: str) -> tuple[dt.datetime, uuid.UUID] | None:
    """Return a run-list cursor (``<updated_at ISO>_<run id>``) as its parts, or None."""
    stamp, _, pk = (cursor or "").partition("_")
    try:
        return dt.datetime.fromisoformat(stamp), uuid.UUID(pk)
    except ValueError:
        return None


def _check(key: str, value: str) -> str:
    """Return why ``value`` is not acceptable for ``key`` ("" when it is)."""
    if len(value) > MAX_VALUE:
        return f"“{key}” is longer than {MAX_VALUE} characters"
    if key == "tab" and value not in TABS:
        return f"tab “{value}” does not exist (one of: {', '.join(TABS)})"
    if key == "view" and value not in ("", "groups"):
        return f"view “{value}” does not exist (leave it out, or “groups”)"
    if key == "age" and value not in AGES:
        return f"age “{value}” is not one of {', '.join(AGES)}"
    if key == "reason" and value not in REASON_LABELS:
        return f"reason “{value}” is not a reason a run stops for"
    if key == "since" and since_parse(value) is None:
        return f"since “{value}” is not a date (use 2026-11-30 or 2026-11-30T14:00, UTC)"
    if key == "team" and not _SLUG.match(value):
        return f"team “{value}” is not a team's short name (letters, digits, - and _)"
    if key == "cursor" and cursor_parse(value) is None:
        return "the page cursor is not valid (showing the first page)"
    return ""


def list_query_parse(params: Mapping[str, str]) -> ListQuery:
    """Return the list query in ``params``; each bad value is dropped and named in ``errors``."""
    query, errors = ListQuery(), []
    values: dict[str, str] = {}
    for key, raw in params.items():
        if key not in KEYS:
            continue
        value = (raw or "").strip()
        problem = _check(key, value) if value else ""
        if problem:
            errors.append(problem)
        elif value:
            values[key] = value
    query.tab = values.get("tab", DEFAULT_TAB)
    query.grouped = values.get("view") == "groups"
    query.cursor = values.get("cursor", "")
    query.filters = QueueFilters(**{k: values.get(k, "") for k in FILTER_KEYS})
    query.errors = errors
    return query


def saved_query_parse(text: str) -> ListQuery:
    """Return the view a saved query string holds; raise InvalidListQuery naming what is wrong."""
    text = (text or "").strip().lstrip("?")
    if not text:
        raise InvalidListQuery("the view has no filters to save")
    # A view is a filter set, not a position: a cursor copied along with the URL is dropped.
    pairs = [(k, v) for k, v in parse_qsl(text, keep_blank_values=True) if k != "cursor"]
    unknown = sorted({k for k, _ in pairs if k not in KEYS})
    problems = [f"“{k}” is not a run-list filter" for k in unknown]
    if len({k for k, _ in pairs}) != len(pairs):
        problems.append("a filter is given twice")
    query = list_query_parse(dict(pairs))
    problems += query.errors
    if problems:
        raise InvalidListQuery("; ".join(problems), problems=problems)
    return query
