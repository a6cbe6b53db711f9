"""Paged tool results: the model asks for pages with next_page; the context holds only those."""
import io
import json

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from ledger.services.paging import is_stream, page_tools
from runs.engine.core.context import context_build
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
TABLE = [{"id": i, "name": f"row-{i}"} for i in range(10_000)]
PAGE = 50


def _page(start: int) -> ToolResult:
    rows = TABLE[start:start + PAGE]
    end = start + len(rows)
    return ToolResult(facts={"rows": rows},
                      summary=f"rows {start}..{end - 1} of {len(TABLE)}",
                      next_cursor=str(end) if end < len(TABLE) else None)


def _rows_page(ctx, cursor: str, table: str) -> ToolResult:
    return _page(int(cursor))


@tool(effect="read", pager=_rows_page)
def rows(ctx, table: str) -> ToolResult:
    """Read a table, one page at a time."""
    return _page(0)


class Recording(ScriptedModel):
    """A scripted model that keeps the tool names it was offered on each call."""

    offered: list[list[str]] = []

    def complete(self, *, messages, tools, **kw):
        Recording.offered.append([t["function"]["name"] for t in tools])
        return super().complete(messages=messages, tools=tools, **kw)


def _last_call_id(ctx) -> str:
    return next(m["tool_calls"][-1]["id"] for m in reversed(ctx.messages) if m.get("tool_calls"))


def _next(ctx):
    return call("next_page", tool_call_id=_last_call_id(ctx), cursor=ctx.fact("next_cursor"))


def _agent(name: str, script: dict) -> Agent:
    Recording.offered = []
    return registry.register(Agent(name=name, version="1", system_prompt="Read tables.",
                                   tools=[rows], plan=[StepSpec("read")],
                                   model=lambda: Recording(script)))


def test_the_model_pages_twice_and_the_context_holds_three_pages(engine):
    agent = _agent("pager", {"read": [call("rows", table="t"), _next, _next, say("read 150")]})
    run = run_start(agent="pager", goal="read the first 150 rows")
    assert drive(run) == "succeeded"
    assert Recording.offered[0] == ["rows"]  # no cursor yet: no next_page tool
    assert Recording.offered[1] == ["rows", "next_page"]
    assert list(ToolCall.objects.filter(run=run).values_list("tool", flat=True)) == [
        "rows", "next_page", "next_page"]
    context = context_build(load_state(run.pk), agent)
    pages = [json.loads(m["content"]) for m in context if m["role"] == "tool"]
    assert [p["summary"] for p in pages] == ["rows 0..49 of 10000", "rows 50..99 of 10000",
                                             "rows 100..149 of 10000"]
    assert [r["id"] for p in pages for r in p["facts"]["rows"]] == list(range(150))
    text = json.dumps(context)
    assert "row-150" not in text and "row-9999" not in text


def test_a_cursor_no_result_offered_is_refused_to_the_model(engine):
    forged = lambda ctx: call("next_page", tool_call_id=_last_call_id(ctx), cursor="9000")  # noqa: E731
    _agent("forger", {"read": [call("rows", table="t"), forged, say("gave up")]})
    run = run_start(agent="forger", goal="read rows")
    assert drive(run) == "succeeded"
    result = load_state(run.pk)["turns"][1]["calls"][0]["result"]
    assert result["status"] == "failed"
    assert "cursor '9000' was not offered" in result["error"]["message"]
    assert "row-9000" not in json.dumps(load_state(run.pk))


def test_a_tool_without_a_pager_is_called_again_with_the_cursor(engine):
    @tool(effect="read", name="rows")
    def plain_rows(ctx, table: str, cursor: str = "0") -> ToolResult:
        """Read a table; pass cursor for later pages."""
        return _page(int(cursor))

    registry.register(Agent(name="plain-pager", version="1", system_prompt="Read tables.",
                            tools=[plain_rows], plan=[StepSpec("read")],
                            model=lambda: ScriptedModel(
                                {"read": [call("rows", table="t"), _next, say("ok")]})))
    run = run_start(agent="plain-pager", goal="read rows")
    assert drive(run) == "succeeded"
    second = load_state(run.pk)["turns"][1]["calls"][0]["result"]
    assert second["summary"] == "rows 50..99 of 10000"


@pytest.mark.parametrize("with_memo", [False, True])
def test_next_page_is_offered_while_any_fact_has_a_cursor_however_the_facts_changed(with_memo):
    memo = {} if with_memo else None
    state = {"facts": {"tc_1": {"x": 1}, "tc_2": [1, 2]}}
    assert page_tools(state, memo) == []
    state["facts"]["tc_3"] = {"next_cursor": "50"}  # added
    assert [t["function"]["name"] for t in page_tools(state, memo)] == ["next_page"]
    state["facts"]["tc_3"] = {"next_cursor": None}  # replaced: the last page
    assert page_tools(state, memo) == []
    state["facts"]["tc_1"] = {"x": 1, "next_cursor": "9"}  # an earlier fact replaced
    assert page_tools(state, memo) != []
    state["facts"]["tc_1"] = {"x": 1}
    state["facts"]["tc_4"] = {"y": 2}
    assert page_tools(state, memo) == []


def test_a_log_is_streamed_when_it_is_a_path_or_a_file_object_only(tmp_path):
    assert not any(is_stream(log) for log in (None, "text", b"bytes", bytearray(b"x")))
    assert is_stream(tmp_path / "log.txt") and is_stream(io.BytesIO(b"x"))
