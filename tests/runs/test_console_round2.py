"""Console round 2 (issue 21): finished-run tabs, short-id search, links between runs,
absolute times, human labels, contrast, and the high-risk approval confirmation."""
from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse

from runs.models import Run
from runs.statuses import RunStatus
from tests.console_factories import client_for, make_attention_run
from tests.factories import make_run

pytestmark = pytest.mark.django_db


def _finished(status: str, goal: str) -> Run:
    run = make_run(goal=goal, agent="support-bot")
    Run.objects.filter(pk=run.pk).update(status=status)
    return run


def test_finished_tabs_count_and_list_each_terminal_status(users):
    _finished(RunStatus.SUCCEEDED, "Done cleanly")
    _finished(RunStatus.SUCCEEDED, "Done cleanly too")
    _finished(RunStatus.COMPLETED_WITH_EXCEPTIONS, "Done with a skip")
    _finished(RunStatus.FAILED, "Went wrong")
    _finished(RunStatus.CANCELLED, "Called off")
    make_attention_run(RunStatus.BLOCKED, goal="Still stuck")
    client = client_for(users["viewer"])
    html = client.get(reverse("console:queue")).content.decode()
    for tab, label, n in (("succeeded", "Succeeded", 2),
                          ("exceptions", "Completed with exceptions", 1),
                          ("failed", "Failed", 1), ("cancelled", "Cancelled", 1)):
        assert re.search(rf'data-tab="{tab}">{label} <span class="count">{n}<', html), tab
    page = client.get(reverse("console:queue"), {"tab": "failed", "agent": "support-bot"})
    body = page.content.decode()
    assert "Went wrong" in body and "Done cleanly" not in body and "Still stuck" not in body
    # The filters stay in the URL of every tab link.
    assert 'href="?agent=support-bot&amp;tab=succeeded"' in body


def test_short_run_id_shown_in_the_table_is_searchable(users):
    wanted = make_attention_run(RunStatus.BLOCKED, goal="Refund A")
    make_attention_run(RunStatus.BLOCKED, goal="Refund B")
    client = client_for(users["viewer"])
    short = str(wanted.pk)[:8]
    html = client.get(reverse("console:queue"), {"tab": "all", "q": short}).content.decode()
    assert "Refund A" in html and "Refund B" not in html
    upper = client.get(reverse("console:queue"), {"tab": "all", "q": short.upper()})
    assert "Refund A" in upper.content.decode()
    # Goal text still matches, and a hex-looking word that is no id's prefix finds nothing.
    assert "Refund B" in client.get(reverse("console:queue"),
                                    {"tab": "all", "q": "refund b"}).content.decode()


def test_parent_and_child_runs_link_to_each_other(users):
    parent = make_attention_run(RunStatus.WAITING, goal="Parent job", wait_kind="children")
    child = make_run(goal="Child job", parent=parent)
    client = client_for(users["viewer"])
    parent_html = client.get(reverse("console:run", args=[parent.pk])).content.decode()
    child_url = reverse("console:run", args=[child.pk])
    assert re.search(rf'data-children>Child runs: <a class="mono" href="{child_url}"', parent_html)
    child_html = client.get(child_url).content.decode()
    parent_url = reverse("console:run", args=[parent.pk])
    assert f'href="{parent_url}" rel="up"' in child_html
    assert f"parent {str(parent.pk)[:8]}" in child_html


def test_times_carry_the_absolute_time_with_timezone(users):
    run = make_attention_run(RunStatus.BLOCKED, goal="Old one")
    stamp = run.updated_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    client = client_for(users["viewer"])
    queue = client.get(reverse("console:queue")).content.decode()
    assert f'<time datetime="{run.updated_at.isoformat()}" title="{stamp}">10m</time>' in queue
    detail = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'title="{stamp}">10m ago</time>' in detail


def test_raw_names_show_as_labels_from_the_tables_beside_the_enums(users):
    from runs.event_types import EVENT_LABELS, EventType
    from runs.statuses import REASON_LABELS, BlockReason

    assert set(EVENT_LABELS) == set(EventType.values)
    assert set(BlockReason.values) <= set(REASON_LABELS)
    unknown = make_attention_run(RunStatus.UNKNOWN, goal="Email maybe sent",
                                 attention_reason="unknown_outcome")
    blocked = make_attention_run(RunStatus.BLOCKED, goal="Over budget",
                                 reason="budget_exhausted", recommended="raise_budget")
    client = client_for(users["viewer"])
    queue = client.get(reverse("console:queue"), {"tab": "all"}).content.decode()
    assert ">Outcome of a write unknown</span>" in queue
    assert ">Budget used up</span>" in queue
    assert ">Raise budget</span>" in queue
    assert ">unknown_outcome<" not in queue and ">raise_budget<" not in queue
    page = client.get(reverse("console:run", args=[unknown.pk])).content.decode()
    assert '<span class="pill pill-unknown">outcome unknown</span>' in page
    assert ">Run created</td>" in page and ">run.created<" not in page
    assert '<option value="tool.unknown" >Tool outcome unknown</option>' in page
    blocked_page = client.get(reverse("console:run", args=[blocked.pk])).content.decode()
    assert '<strong class="rec">' in blocked_page and ">raise_budget<" not in blocked_page


def test_an_open_circuit_breaker_shows_when_it_lets_calls_through(users):
    from agentops import clock
    from ledger.models import ToolLimit

    run = make_attention_run(RunStatus.BLOCKED, reason="circuit_open", tool="charge_card")
    opened = clock.now() - dt.timedelta(seconds=10)
    ToolLimit.objects.create(tool="charge_card", breaker_opened_at=opened, breaker_cooldown_s=60)
    client = client_for(users["viewer"])
    html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    until = (opened + dt.timedelta(seconds=60)).astimezone(dt.UTC)
    assert "open for charge_card: calls allowed again" in html
    assert re.search(rf'title="{until.strftime("%Y-%m-%d %H:%M:%S UTC")}">in 0m (49|50)s</time>',
                     html)
    ToolLimit.objects.filter(tool="charge_card").update(
        breaker_opened_at=clock.now() - dt.timedelta(seconds=61))
    assert "data-breaker" not in client.get(
        reverse("console:run", args=[run.pk])).content.decode()
