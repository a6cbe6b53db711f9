"""The trace view (/runs/<id>/trace/): a run's steps, model calls and tool attempts on one axis.

Driven through the engine: a lookup whose connection drops once (retried), a refund a person
approves, and a worker that claims the run and dies (the sweeper recovers it). With tracing
and content capture on, each model call opens its request (an artifact, by its id) and reply.
"""
from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agentops import clock
from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from approvals.actions import ACTIONS
from approvals.models import Approval
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive
from tests.otlp_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)
_dropped: set[str] = set()


@tool(effect="read")
def lookup(ctx, order: str) -> ToolResult:
    """Look an order up; the connection drops on the first attempt of each call."""
    if ctx.tool_call_id not in _dropped:
        _dropped.add(ctx.tool_call_id)
        raise ConnectionError("connection dropped")
    return ToolResult(facts={"order": order, "total": 40}, summary=f"order {order}: 40 EUR")


@tool(effect="write", idempotent=True, approval="always")
def refund(ctx, order: str) -> ToolResult:
    """Refund an order (a person approves)."""
    return ToolResult(facts={"refunded": order}, summary=f"refunded {order}")


def _agent() -> None:
    registry.register(Agent(
        name="trace-view", version="1", system_prompt="Refund order o-7 after looking it up.",
        tools=[lookup, refund], plan=[StepSpec("look"), StepSpec("pay")],
        model=lambda: ScriptedModel({"look": [call("lookup", order="o-7"), say("found o-7")],
                                     "pay": [call("refund", order="o-7"), say("refunded")]})))


@pytest.fixture
def traced(engine, settings, monkeypatch):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with Receiver() as receiver:
        settings.AGENTOPS_OTLP_ENDPOINT = receiver.endpoint
        settings.AGENTOPS_TRACE_CONTENT = True
        yield receiver


def _run_with_a_retry_an_approval_and_a_lost_worker() -> Run:
    _agent()
    run = run_start(agent="trace-view", goal="refund o-7")
    assert drive(run) == "waiting"
    user = User.objects.create(username="helper")
    user.groups.add(Group.objects.get_or_create(name="support")[0])
    ACTIONS["approve"].execute(user, Approval.objects.get(run=run, status="pending"), "ok")
    # A worker claims the run and dies before its first unit: its lease runs out.
    assert run_claim(run_id=run.pk, owner="lost-host:1", ttl_s=30) is not None
    Run.objects.filter(pk=run.pk).update(lease_expires_at=clock.now() - dt.timedelta(seconds=1))
    assert run.pk in runs_recover_expired()
    assert drive(run) == "succeeded"
    return run


def _rows(html: str) -> list[tuple[str, str]]:
    """Return (row class, first cell text) for each waterfall row."""
    out = []
    for cls, cell in re.findall(r'<tr data-row data-id="[^"]+" id="[^"]+" class="tr-(\w+)"'
                                r'[^>]*>\s*<td[^>]*>(.*?)</td>', html, re.S):
        text = re.sub(r"<details.*?<summary>(.*?)</summary>.*", r"\1", cell, flags=re.S)
        out.append((cls, " ".join(re.sub(r"<[^>]+>", " ", text).split())))
    return out


def test_the_trace_shows_steps_calls_retries_and_the_recovery_gap(traced):
    run = _run_with_a_retry_an_approval_and_a_lost_worker()
    viewer = User.objects.create(username="viewer")
    viewer.groups.add(Group.objects.get_or_create(name="viewers")[0])
    console = Client()
    console.force_login(User.objects.create(username="root", is_superuser=True))
    html = console.get(f"/runs/{run.pk}/trace/").content.decode()
    rows = _rows(html)
    assert rows == [
        ("step", "look"), ("model", "model call · turn 1"),
        ("tool", "lookup · attempt 1 read"), ("tool", "lookup · attempt 2 (retry) read"),
        ("model", "model call · turn 2"),
        ("step", "pay"), ("model", "model call · turn 3"),
        ("gap", "worker lost · recovery 1 lease expired"),
        ("tool", "refund · attempt 1 idempotent"), ("model", "model call · turn 4"),
    ]
    # Bars on one axis: every row has one, and the later rows start further right.
    bars = [(float(x), float(w)) for x, w in re.findall(
        r'<rect x="([\d.]+)" y="1" width="([\d.]+)"', html)]
    assert len(bars) == len(rows) and all(0 <= x <= 1000 and w > 0 for x, w in bars)
    assert bars[-1][0] >= bars[1][0]
    assert html.count(">60<") == 4  # 50 + 10 tokens per model call
    totals = re.search(r"data-trace-totals>(.*?)</span>", html).group(1)
    assert totals.startswith("7 calls · ") and "240 tokens" in totals
    assert totals.endswith("· 1 retry · 1 recovery")
    # A model call opens its reply and its request, kept as an artifact opened by its id.
    assert "→ lookup(" in html and "refunded" in html
    links = re.findall(r'href="(/runs/[^"]+/artifacts/([0-9a-f]{64})/)" data-prompt-link', html)
    assert len(links) == 4
    prompt = console.get(links[0][0])
    assert prompt.status_code == 200
    assert b"Refund order o-7 after looking it up." in prompt.content
    # The ids on the page are the exported spans' ids.
    shown = set(re.findall(r"span ([0-9a-f]{16})</p>", html))
    deadline = clock.monotonic() + 10
    while clock.monotonic() < deadline and not shown <= {s["span_id"] for s in traced.spans()}:
        pass
    assert len(shown) == 4 and shown <= {s["span_id"] for s in traced.spans()}


def test_without_content_capture_the_request_is_said_to_be_not_kept(engine):
    _agent()
    run = run_start(agent="trace-view", goal="refund o-7")
    assert drive(run) == "waiting"
    console = Client()
    console.force_login(User.objects.create(username="root", is_superuser=True))
    html = console.get(f"/runs/{run.pk}/trace/").content.decode()
    assert "Not kept: set AGENTOPS_TRACE_CONTENT" in html
    assert "data-prompt-link" not in html
    assert [r[0] for r in _rows(html)] == ["step", "model", "tool", "tool", "model", "step",
                                           "model"]
