"""A batch parent names its blocked child and rolls its children's exceptions into its outcome.

Parent and children run through the engine; the operator reads the parent's run page, follows
the link to the child, presses the child's recommendation through the console, and the
sweeper wakes the parent.
"""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, WaitForChildren, tool
from ledger.errors import ToolPermissionDenied
from runs.models import Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
DENIED = {1}  # pages in the archive we may not read


@tool(effect="read")
def read_page(ctx, n: int) -> ToolResult:
    """Read one page of a document (page 1 sits in an archive we may not read)."""
    if n in DENIED:
        raise ToolPermissionDenied("no access to the archive holding page 1")
    return ToolResult(facts={"page": n, "words": 300}, summary=f"page {n}: 300 words")


@tool(effect="read")
def extract_pages(ctx, count: int) -> ToolResult:
    """Start one child run per page and wait for them all."""
    raise WaitForChildren([{"agent": "page-kid", "goal": f"page {i}", "input": {"n": i}}
                           for i in range(count)], timeout_s=3600)


def _agents() -> None:
    if registry.has("page-batch", "1"):
        return
    registry.register(Agent(
        name="page-kid", version="1", system_prompt="You read pages.", tools=[read_page],
        plan=[StepSpec("read")],
        model=lambda: ScriptedModel({"read": [lambda sc: call("read_page", n=sc.input["n"]),
                                              say("read")]})))
    registry.register(Agent(
        name="page-batch", version="1", system_prompt="You read documents.",
        tools=[extract_pages], plan=[StepSpec("extract")],
        model=lambda: ScriptedModel({"extract": [call("extract_pages", count=3),
                                                 say("all pages read")]})))


def _page(user, run: Run) -> str:
    return client_for(user).get(reverse("console:run", args=[run.pk])).content.decode()


def test_a_parent_names_its_blocked_child_and_ends_with_its_exceptions(engine):
    _agents()
    operator = make_role_users()["operator"]
    parent = run_start(agent="page-batch", goal="read the document")
    assert drive(parent) == "waiting" and parent.wait_kind == "children"
    kids = {k.input["n"]: k for k in Run.objects.filter(parent=parent)}
    assert [drive(kids[n]) for n in range(3)] == ["succeeded", "blocked", "succeeded"]
    stuck = kids[1]

    html = _page(operator, parent)
    assert "data-children-advice" in html
    assert f"Act on child run {str(stuck.pk)[:8]}: Retry step" in html
    assert "grant it, then retry" in html  # the child's own why
    link = re.search(r'data-child-trouble="([0-9a-f-]+)"><a class="mono" href="([^"]+)"', html)
    assert link and link.group(1) == str(stuck.pk)
    assert link.group(2) == reverse("console:run", args=[stuck.pk])
    child_html = client_for(operator).get(link.group(2)).content.decode()
    assert 'data-recommended="retry"' in child_html  # the same advice, where it can be pressed

    stuck.refresh_from_db()  # the operator decides the page cannot be had: skip it
    answer = client_for(operator).post(reverse("console:run_action", args=[stuck.pk, "skip"]),
                                       {"reason": "page 1 is out of reach", "seen_seq": stuck.last_seq})
    assert answer.status_code in (200, 204, 302), answer.content[:300]
    assert drive(stuck) == "completed_with_exceptions"
    assert "data-children-advice" not in _page(operator, parent)

    assert str(parent.pk) in [str(r) for r in sweep_once().children]
    assert drive(parent) == "completed_with_exceptions"
    parent.refresh_from_db()
    [item] = parent.exceptions
    assert item["kind"] == "child_exceptions" and item["child"] == str(stuck.pk)
    assert item["what"] == (f"child run {str(stuck.pk)[:8]} (page-kid) ended completed with "
                            "exceptions")
    assert "step read was skipped" in item["why"]
    html = _page(operator, parent)
    assert 'data-exception="child_exceptions"' in html
    assert f'href="{reverse("console:run", args=[stuck.pk])}" data-child-link' in html


def test_children_that_all_succeed_leave_the_parent_a_clean_success(engine, monkeypatch):
    _agents()
    monkeypatch.setattr("tests.runs.test_batch_children.DENIED", set())
    parent = run_start(agent="page-batch", goal="read the document")
    assert drive(parent) == "waiting"
    assert all(drive(k) == "succeeded" for k in Run.objects.filter(parent=parent))
    assert "data-children-advice" not in _page(make_role_users()["operator"], parent)
    sweep_once()
    assert drive(parent) == "succeeded"
