"""Results kept out of the context are listed by id; the model reads a page of one by id.

Driven through the engine with a scripted model that only knows what its context shows: it
finds the id in the listing of kept-out results, asks expand_result for a page, and answers
with a fact that only that page holds.
"""
from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from ledger.services.expand import page_bytes
from runs.engine.core.context import context_build
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
CODE = "WX-4471"
FILLER = "".join(f"line {i}: nothing of note here ü\n" for i in range(400))


@tool(effect="read")
def manual(ctx, product: str) -> ToolResult:
    """Read a product manual (long: its text is kept out of the context)."""
    text = FILLER + f"The warranty code of {product} is {CODE}.\n" + FILLER
    return ToolResult(facts={"product": product}, summary=f"the manual of {product}",
                      log=text)


@tool(effect="read")
def price(ctx, product: str) -> ToolResult:
    """Look up a price (short: shown whole)."""
    return ToolResult(facts={"price": 12}, summary="12 EUR")


class Recording(ScriptedModel):
    """A scripted model that keeps what it was offered and shown."""

    offered: list[list[str]] = []
    seen: list[list[dict]] = []
    tools: list[list[dict]] = []

    def complete(self, *, messages, tools, **kw):
        Recording.offered.append([t["function"]["name"] for t in tools])
        Recording.tools.append(tools)
        Recording.seen.append(messages)
        return super().complete(messages=messages, tools=tools, **kw)


def _listed(ctx) -> str:
    """Return the id of the manual result as the context's listing of kept-out results shows it."""
    text = "\n".join(m["content"] for m in ctx.messages if m["role"] == "user")
    listing = text.split("## Full results kept out of the context", 1)[1]
    return re.search(r"- (\S+) \(manual\): the manual of kettle", listing).group(1)


def _code_page(ctx):
    pages = -(-len(FILLER.encode()) // page_bytes())  # the code sits just past the filler
    return call("expand_result", tool_call_id=_listed(ctx), page=pages)


def _answer(ctx):
    body = json.loads(next(m["content"] for m in reversed(ctx.messages) if m["role"] == "tool"))
    found = re.search(r"warranty code of kettle is (\S+)\.", body["summary"])
    return say(f"The warranty code is {found.group(1)}" if found else "I could not find it")


def _agent(name: str, script: dict) -> Agent:
    Recording.offered, Recording.seen, Recording.tools = [], [], []
    if registry.has(name, "1"):
        return registry.get(name, "1")
    return registry.register(Agent(
        name=name, version="1", system_prompt="Answer from the manuals.", tools=[manual, price],
        plan=[StepSpec("read"), StepSpec("answer", depends_on=("read",))],
        model=lambda: Recording(script)))


def test_the_model_expands_a_kept_out_result_by_id_and_answers_from_it(engine, settings):
    settings.AGENTOPS_INLINE_RESULT_BYTES = 2000
    agent = _agent("expander", {"read": [call("manual", product="kettle"), say("read it")],
                                "answer": [_code_page, _answer]})
    run = run_start(agent="expander", goal="find the warranty code of the kettle")
    assert drive(run) == "succeeded"
    assert "expand_result" not in Recording.offered[0]  # nothing kept out yet
    assert "expand_result" in Recording.offered[2]
    big = ToolCall.objects.get(run=run, tool="manual")
    offered = next(t for t in Recording.tools[2] if t["function"]["name"] == "expand_result")
    assert offered["function"]["parameters"]["properties"]["tool_call_id"]["enum"] == [
        big.tool_call_id]  # the listed ids are the choices a schema-decoding model has
    listing = Recording.seen[2][2]["content"]
    assert f"- {big.tool_call_id} (manual): the manual of kettle" in listing
    assert CODE not in json.dumps(Recording.seen[2])  # the full text never entered the context
    expand = ToolCall.objects.get(run=run, tool="expand_result")
    assert expand.status == "succeeded" and expand.args["tool_call_id"] == big.tool_call_id
    assert expand.facts["pages"] > expand.facts["page"] > 1
    assert len(expand.summary.encode()) < settings.AGENTOPS_INLINE_RESULT_BYTES
    state = load_state(run.pk)
    assert state["steps"]["answer"]["output"]["text"] == f"The warranty code is {CODE}"
    context = json.dumps(context_build(state, agent))
    lines_per_page = page_bytes() // len("line 100: nothing of note here ü\n")
    assert CODE in context and context.count("nothing of note") <= lines_per_page + 1  # one page

    html = client_for(make_role_users()["operator"]).get(
        reverse("console:run", args=[run.pk])).content.decode()
    assert "expand_result" in html


def test_a_bad_id_a_whole_result_and_a_missing_page_are_refused_saying_which(engine, settings):
    settings.AGENTOPS_INLINE_RESULT_BYTES = 2000

    def whole(ctx):
        shown = next(m["tool_calls"][0]["id"] for m in ctx.messages
                     if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "price")
        return call("expand_result", tool_call_id=shown)

    _agent("expand-errors", {
        "read": [call("manual", product="kettle"), call("price", product="kettle"), say("ok")],
        "answer": [call("expand_result", tool_call_id="tc_nope"), whole,
                   lambda ctx: call("expand_result", tool_call_id=_listed(ctx), page=99),
                   # the real small model once asked for this page: a refusal, not an OSError
                   lambda ctx: call("expand_result", tool_call_id=_listed(ctx),
                                    page=1493126178312721),
                   say("gave up")]})
    run = run_start(agent="expand-errors", goal="try bad expansions")
    assert drive(run) == "succeeded"
    errors = [(c.status, c.error) for c in ToolCall.objects.filter(
        run=run, tool="expand_result").order_by("created_at")]
    assert [s for s, _ in errors] == ["failed"] * 4
    assert "there is no tool call 'tc_nope' in this run" in errors[0][1]
    assert "is shown whole in the context; nothing of it was kept out" in errors[1][1]
    assert re.search(r"page 99 does not exist: the result of tc_\S+ has \d+ page", errors[2][1])
    assert re.search(r"page 1493126178312721 does not exist: the result of tc_\S+ has \d+ page",
                     errors[3][1])
