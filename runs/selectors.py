"""Read-side queries of the console: the attention queue, a run's detail, events and audit.

Every list is keyset-paginated on an indexed ordering so a page costs the same with 100k runs
and millions of events; nothing here counts or loads a run's whole event log.
"""
from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet, Sum

from agentops import clock
from agentops.errors import AgentOpsError
from approvals.models import Approval, Intervention
from approvals.statuses import ApprovalStatus
from ledger.models import ToolCall
from runs.event_types import EventType
from runs.errors import RunNotFound
from runs.list_filters import AGES, TABS, QueueFilters, cursor_parse, since_parse
from runs.models import ModelPrice, Run, Snapshot, Step, Team
from runs.models.event import run_events
from runs.statuses import ATTENTION, RunStatus, WaitKind
from ledger.models import ToolLimit
from ledger.services.limits import breaker_closes_at
from runs.engine.runtime.exceptions import exceptions_resolve
from runs.engine.runtime.snapshots import load_state
from runs.event_archive import archived_events_restore
from runs.statuses import TERMINAL
from django.conf import settings
from runs.live import action_phrase
from runs.scope import Teams, scoped

PAGE_SIZE = 50
COUNT_CAP = 10_000
# Tabs of finished runs: one per terminal status (runs/statuses.py TERMINAL).
FINISHED_TABS = {"succeeded": RunStatus.SUCCEEDED,
                 "exceptions": RunStatus.COMPLETED_WITH_EXCEPTIONS,
                 "failed": RunStatus.FAILED, "cancelled": RunStatus.CANCELLED}
# A run id prefix as the table shows it (8 hex digits), or longer, dashes allowed.
_ID_PREFIX = re.compile(r"^[0-9a-fA-F][0-9a-fA-F-]{3,35}$")
# Attention tabs show the longest-stuck first (most urgent); activity tabs the newest first.
_OLDEST_FIRST = frozenset({"waiting", "blocked", "unknown", "approvals"})


@dataclass
class Page:
    """One page of rows and the cursor of the next page (None on the last page)."""

    rows: list[Any]
    next_cursor: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _tab_q(tab: str) -> Q:
    attention_wait = Q(status=RunStatus.WAITING)
    return {
        "waiting": attention_wait & ~Q(wait_kind=WaitKind.APPROVAL),
        "blocked": Q(status=RunStatus.BLOCKED),
        "unknown": Q(status=RunStatus.UNKNOWN),
        "approvals": attention_wait & Q(wait_kind=WaitKind.APPROVAL),
        "running": Q(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]),
        **{tab: Q(status=status) for tab, status in FINISHED_TABS.items()},
        "all": Q(),
    }.get(tab, Q(status__in=list(ATTENTION)))


def run_filter(*, tab: str, filters: QueueFilters, teams: Teams) -> QuerySet[Run]:
    """Return the runs of ``teams`` in ``tab`` that match ``filters`` (unordered, unevaluated).

    A search by a run's id finds it only inside ``teams``: another team's run is "not found".
    """
    qs = scoped(Run.objects.filter(_tab_q(tab)), teams)
    if filters.team:
        qs = qs.filter(team__slug=filters.team)
    if filters.agent:
        qs = qs.filter(agent_name=filters.agent)
    if filters.reason:
        qs = qs.filter(attention_reason=filters.reason)
    if filters.sig:
        qs = qs.filter(attention_signature=filters.sig)
    if filters.age in AGES:
        qs = qs.filter(updated_at__lte=clock.now() - AGES[filters.age])
    if filters.owner:
        qs = qs.filter(created_by__username=filters.owner)
    since = since_parse(filters.since)
    if since:
        qs = qs.filter(updated_at__gte=since)
    if filters.tool:
        calls = ToolCall.objects.filter(tool_call_id=OuterRef("current_tool_call"),
                                        tool=filters.tool)
        qs = qs.filter(Exists(calls))
    if filters.q:
        text = filters.q.strip()
        run_id = parse_run_id(text)
        qs = qs.filter(pk=run_id) if run_id else qs.filter(_text_q(text))
    return qs


def _text_q(text: str) -> Q:
    """Match the goal, or a run id starting with ``text`` (the table's 8-character id)."""
    found = Q(goal__icontains=text)
    if _ID_PREFIX.match(text):
        found |= Q(pk__istartswith=text.lower())
    return found


def parse_run_id(text: str) -> uuid.UUID | None:
    """Return ``text`` as a run id, or None when it is not a UUID."""
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _encode_cursor(run: Run) -> str:
    return f"{run.updated_at.isoformat()}_{run.pk}"


def run_list_attention(*, tab: str, filters: QueueFilters, teams: Teams, cursor: str = "",
                       limit: int = PAGE_SIZE) -> Page:
    """Return one keyset page of the queue ``tab`` with each row's current tool name."""
    qs = run_filter(tab=tab, filters=filters, teams=teams).select_related("team")
    oldest_first = tab in _OLDEST_FIRST
    decoded = cursor_parse(cursor) if cursor else None
    if decoded:
        stamp, pk = decoded
        op = "gt" if oldest_first else "lt"
        qs = qs.filter(Q(**{f"updated_at__{op}": stamp})
                       | Q(updated_at=stamp, **{f"pk__{op}": pk}))
    order = ("updated_at", "id") if oldest_first else ("-updated_at", "-id")
    rows = list(qs.order_by(*order)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    tools = dict(ToolCall.objects.filter(
        tool_call_id__in=[r.current_tool_call for r in rows if r.current_tool_call]
    ).values_list("tool_call_id", "tool"))
    for row in rows:
        row.current_tool = tools.get(row.current_tool_call, "")
    return Page(rows=rows, next_cursor=_encode_cursor(rows[-1]) if more else None)


def run_count_capped(qs: QuerySet[Run]) -> int:
    """Count ``qs`` up to COUNT_CAP + 1 rows."""
    # A capped count reads at most COUNT_CAP index entries, so "All" stays cheap at 100k runs.
    return qs.values("pk")[: COUNT_CAP + 1].count()


def run_counts_by_tab(*, teams: Teams) -> dict[str, int]:
    """Return the number of runs of ``teams`` per queue tab (busy tabs capped at COUNT_CAP + 1)."""
    counts = dict.fromkeys(TABS, 0)
    runs = scoped(Run.objects.all(), teams)
    grouped = (runs.filter(status__in=list(ATTENTION))
               .values_list("status", "wait_kind").annotate(n=Count("pk")))
    for status, kind, n in grouped:
        if status == RunStatus.WAITING:
            counts["approvals" if kind == WaitKind.APPROVAL else "waiting"] += n
        else:
            counts[status] += n
    counts["running"] = run_count_capped(runs.filter(_tab_q("running")))
    for tab in FINISHED_TABS:
        counts[tab] = run_count_capped(runs.filter(_tab_q(tab)))
    counts["all"] = run_count_capped(runs)
    return counts


def run_groups_by_signature(*, filters: QueueFilters, teams: Teams,
                            limit: int = 100) -> list[dict[str, Any]]:
    """Return attention runs of ``teams`` grouped by failure signature, biggest group first."""
    qs = run_filter(tab="attention", filters=filters, teams=teams).exclude(attention_signature="")
    return list(
        qs.values("attention_signature")
        .annotate(n=Count("pk"), reason=Max("attention_reason"), step=Max("current_step"),
                  agent=Max("agent_name"), detail=Max("attention_detail"),
                  oldest=Min("updated_at"), newest=Max("updated_at"))
        .order_by("-n", "attention_signature")[:limit]
    )


def run_ids_visible(raw: list[str], *, teams: Teams) -> list[str]:
    """Return the run ids in ``raw`` that exist inside ``teams`` (others silently dropped)."""
    ids = [i for i in raw if parse_run_id(i)]
    return [str(pk) for pk in scoped(Run.objects.filter(pk__in=ids), teams)
            .values_list("pk", flat=True)] if ids else []


def run_id_strings(*, teams: Teams) -> list[str] | None:
    """Return the ids (as text) of every run in ``teams``; None when ``teams`` is every team."""
    if teams is None:
        return None
    return [str(pk) for pk in scoped(Run.objects.all(), teams).values_list("pk", flat=True)]


def team_choices(*, teams: Teams) -> list[str]:
    """Return the slugs of the teams in ``teams`` when there are several (the team filter)."""
    slugs = list(scoped(Team.objects.all(), teams, "pk").order_by("slug")
                 .values_list("slug", flat=True)[:200])
    return slugs if len(slugs) > 1 else []


@dataclass
class RunDetail:
    """What the run page shows above the fold."""

    run: Run
    tool_call: ToolCall | None
    approval: Approval | None
    steps: list[Step]


def run_get_detail(*, run_id: Any, teams: Teams) -> RunDetail:
    """Return the run with its current tool call, pending approval and steps.

    A run outside ``teams`` is RunNotFound, like one that does not exist (never "forbidden":
    that would tell the caller it exists).
    """
    run = scoped(Run.objects.select_related("team"), teams).filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id}", run_id=str(run_id))
    archived_events_restore(run.pk)  # an archived log is read back before the page reads it
    tool_call = (ToolCall.objects.filter(tool_call_id=run.current_tool_call).first()
                 if run.current_tool_call else None)
    approval = (Approval.objects.filter(run=run, status=ApprovalStatus.PENDING)
                .order_by("-created_at").first())
    steps = list(Step.objects.filter(run=run).order_by("position")[:500])
    return RunDetail(run=run, tool_call=tool_call, approval=approval, steps=steps)


def tool_breaker_closes_at(*, tool: str, team_id: int) -> dt.datetime | None:
    """Return when ``tool``'s open breaker in team ``team_id`` lets calls through, or None."""
    return breaker_closes_at(ToolLimit.objects.filter(team_id=team_id, tool=tool).first()
                             ) if tool else None


def run_children(*, run: Run, limit: int = 50) -> list[Run]:
    """Return the runs ``run`` started (its child runs), oldest first."""
    return list(Run.objects.filter(parent_id=run.pk).only("id", "status", "goal", "agent_name")
                .order_by("created_at", "id")[:limit])


def run_exceptions(*, run: Run) -> list[dict[str, Any]]:
    """Return what keeps ``run`` from a clean success: final once it ended, else so far."""
    if run.status in TERMINAL:
        return list(run.exceptions or [])
    try:
        items = load_state(run).get("exceptions", [])
    except (KeyError, TypeError, AgentOpsError):
        # A log this code cannot fold (an unknown schema, a run made by hand) still renders;
        # its exceptions show once it ends.
        return []
    return exceptions_resolve(run.pk, items)


def event_page(*, run: Run, before_seq: int | None = None, type: str = "",
               tool_call_id: str = "", limit: int = PAGE_SIZE) -> Page:
    """Return the newest events of a run before ``before_seq``, optionally filtered."""
    qs = run_events(run)
    if type:
        qs = qs.filter(type=type)
    if tool_call_id:
        qs = qs.filter(tool_call_id=tool_call_id)
    if before_seq:
        qs = qs.filter(seq__lt=before_seq)
    rows = list(qs.order_by("-seq")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows=rows, next_cursor=str(rows[-1].seq) if more and rows else None)


def ledger_for_run(*, run_id: Any, after_id: int | None = None,
                   limit: int = PAGE_SIZE) -> Page:
    """Return a page of a run's tool calls (oldest first) with their attempts."""
    qs = ToolCall.objects.filter(run_id=run_id).order_by("id")
    if after_id:
        qs = qs.filter(id__gt=after_id)
    rows = list(qs.prefetch_related("attempt_rows")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows=rows, next_cursor=str(rows[-1].id) if more and rows else None)


def artifact_belongs_to_run(*, run: Run, sha256: str) -> bool:
    """Return True when ``sha256`` is the output or a log of one of the run's tool calls, or
    the request of one of its model calls (kept with tracing's content capture)."""
    return ToolCall.objects.filter(run_id=run.pk).filter(
        Q(artifact_sha256=sha256) | Q(attempt_rows__log_sha256=sha256)).exists() or (
        run_events(run).filter(type__in=(EventType.MODEL_REPLIED,
                                                      EventType.MODEL_FAILED),
                             data__prompt__artifact=sha256).exists())


def snapshots_for_run(*, run_id: Any, limit: int = 20) -> list[Snapshot]:
    """Return the newest snapshots of a run, without their (large) state."""
    return list(Snapshot.objects.filter(run_id=run_id).defer("state")
                .order_by("-seq")[:limit])


def model_prices() -> list[dict[str, Any]]:
    """Return the price table: the settings' defaults, then the rows an admin set (which win)."""
    rows = {m: {"model": m, "input": p[0], "output": p[1], "row": None}
            for m, p in settings.AGENTOPS_MODEL_PRICES.items()}
    for row in ModelPrice.objects.select_related("updated_by").order_by("model")[:500]:
        rows[row.model] = {"model": row.model, "input": row.input_per_mtok_micros,
                           "output": row.output_per_mtok_micros, "row": row}
    return sorted(rows.values(), key=lambda r: r["model"])


def spend_by_agent(*, teams: Teams, limit: int = 100) -> list[dict[str, Any]]:
    """Return runs, tokens and cost per agent in ``teams``, the most expensive first."""
    return list(scoped(Run.objects.all(), teams).order_by().values("agent_name")
                .annotate(runs=Count("id"), tokens=Sum("tokens_used"), cost=Sum("cost_micros"))
                .order_by("-cost", "agent_name")[:limit])


def run_change_note(*, run: Run, since_seq: int | None) -> str:
    """Return who changed ``run`` after event ``since_seq`` and when ("alice retried this run 4 s ago")."""
    first_new = (run_events(run).filter(seq__gt=since_seq or 0)
                 .order_by("seq").values_list("at", flat=True).first())
    row = (Intervention.objects.filter(run_id=run.pk, at__gte=first_new).order_by("-at", "-id")
           .first() if first_new else None)
    if row is not None:
        return f"{action_phrase(row.action, row.actor_name)} {_ago(row.at)}"
    if first_new is None:
        return ""
    return f"the engine moved this run on (now {run.status}) {_ago(run.updated_at)}"


def _ago(at: dt.datetime) -> str:
    seconds = max(0, int((clock.now() - at).total_seconds()))
    if seconds < 90:
        return f"{seconds} s ago"
    return f"{seconds // 60} min ago" if seconds < 5400 else f"{seconds // 3600} h ago"


def interventions_for_run(*, run_id: Any, limit: int = 50) -> list[Intervention]:
    """Return the newest audit rows of a run."""
    return list(Intervention.objects.filter(run_id=run_id).order_by("-at", "-id")[:limit])


@dataclass
class AuditFilters:
    """The audit-log filters a URL carries (all optional)."""

    actor: str = ""
    run: str = ""
    action: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None


def audit_list(*, filters: AuditFilters, teams: Teams, before_id: int | None = None,
               limit: int = PAGE_SIZE) -> Page:
    """Return a keyset page of audit rows, newest first (ids grow with time).

    With ``teams`` (not every team): only rows about runs of those teams; rows about no run
    (settings, users) are for the installation's admins.
    """
    qs = scoped(Intervention.objects.select_related("run"), teams, "run__team_id")
    if filters.actor:
        qs = qs.filter(actor_name=filters.actor)
    if filters.run:
        run_id = parse_run_id(filters.run)
        qs = qs.filter(run_id=run_id) if run_id else qs.none()
    if filters.action:
        qs = qs.filter(action__startswith=filters.action)
    if filters.since:
        qs = qs.filter(at__gte=filters.since)
    if filters.until:
        qs = qs.filter(at__lt=filters.until)
    if before_id:
        qs = qs.filter(id__lt=before_id)
    rows = list(qs.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows=rows, next_cursor=str(rows[-1].id) if more and rows else None)
