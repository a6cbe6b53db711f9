"""The real small model (Gemma 3 270M, llama.cpp) expands a kept-out result by id and uses it.

The manual's text is too big for the context: the context lists it by tool_call_id with its
summary, which does not hold the warranty code. The second step offers only expand_result
(forced with AGENTOPS_MODEL_TOOL_CHOICE=required), so the model must copy the id from the
listing; then it answers in text. Work done = the expand_result call named the manual's
call and succeeded, and the answer carries the code that only the expanded page holds.

The offered schema lists the kept-out ids as the choices, so the model (decoding to the
schema) picks a real id. Measured (2026-12-04, 4 runs): it expanded the right result 3/4
(once it asked for page 100 of 30, refused saying so), but answered with the code 0/4: it
echoes the tool call or the plan instead. On 2026-12-07 (other random ids in the prompt) it
named the manual's id in 4/4 runs but asked for pages 1,000 to 1.2e15 of about 27 each time,
refused saying so: 0/4 expanded. So the test requires at least one run naming the manual's
id (the schema's part) and every refusal to say what was wrong; it prints the rates, and
reports as xfail a model that never asked for a page that exists or never answered with
the code.
"""
from __future__ import annotations

import re

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from runs.statuses import RUNNABLE
from tests.conftest import drive

from .conftest import N_CTX

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400), pytest.mark.django_db]
ATTEMPTS = 4
CODE = "WX-4471"


@tool(effect="read")
def fetch_manual(ctx) -> ToolResult:
    """Fetch the kettle's manual."""
    # The code stands in every section, so any page of the stored text holds it; the summary
    # and facts the context shows do not.
    text = "".join(f"Section {i}: descale the kettle monthly. The warranty code is {CODE}.\n"
                   for i in range(160))
    return ToolResult(facts={"product": "kettle"}, summary="the kettle's manual (long)",
                      log=text)


@pytest.fixture
def real_agent(engine, settings, llama_server):
    """A two-step agent on the real llama.cpp server: fetch the manual, then expand it."""
    settings.AGENTOPS_MODEL_BASE_URL = llama_server
    settings.AGENTOPS_MODEL_NAME = "gemma-3-270m"
    settings.AGENTOPS_MODEL_TIMEOUT_S = 120
    settings.AGENTOPS_MODEL_CONTEXT_WINDOW = N_CTX
    settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
    settings.AGENTOPS_MODEL_MAX_TOKENS = 128
    settings.AGENTOPS_INLINE_RESULT_BYTES = 800  # pages of 400 bytes: about 27 of them
    if registry.has("real-expander", "1"):
        return registry.get("real-expander", "1")
    return registry.register(Agent(
        name="real-expander", version="1",
        system_prompt="You answer questions about products from their manuals. "
                      "Call the tool you are given.",
        tools=[fetch_manual],
        plan=[StepSpec("fetch", title="Fetch the manual", tools=("fetch_manual",)),
              StepSpec("expand", title="Read the manual with expand_result (use the "
                                        "tool_call_id listed above), then answer: what is "
                                        "the warranty code?",
                       depends_on=("fetch",), tools=("expand_result",))]))


def _attempt() -> tuple[bool, bool, bool, str]:
    """Run the agent once; return (named the manual's id, expanded it, answered with the
    code, what it did)."""
    run = run_start(agent="real-expander", goal="What is the kettle's warranty code?")
    assert drive(run, max_ticks=40) not in RUNNABLE
    run.refresh_from_db()
    manual = ToolCall.objects.filter(run=run, tool="fetch_manual", status="succeeded").first()
    if manual is None:
        return False, False, False, (f"no manual fetched ({run.status}: "
                                     f"{run.attention_detail[:120]})")
    assert manual.artifact_sha256  # kept out of the context
    expands = list(ToolCall.objects.filter(run=run, tool="expand_result"))
    for c in expands:  # whatever the model sent, a refusal says what was wrong
        assert c.status == "succeeded" or re.search(
            r"there is no tool call|does not exist: the result of|is shown whole|"
            r"invalid|must be", c.error), (c.args, c.error)
    named = [c for c in expands if c.args.get("tool_call_id") == manual.tool_call_id]
    expanded = any(c.status == "succeeded" and CODE in c.summary for c in named)
    answer = ((load_state(run.pk)["steps"].get("expand") or {}).get("output") or {}).get(
        "text", "")
    said = f"expand calls {[(c.status, c.args) for c in expands]}, answer {answer[:80]!r}"
    return bool(named), expanded, expanded and CODE in answer, said


def test_the_small_model_expands_the_result_by_id_and_answers_from_it(real_agent, capsys):
    outcomes = [_attempt() for _ in range(ATTEMPTS)]
    named, expanded, answered = (sum(o[i] for o in outcomes) for i in range(3))
    report = (f"Gemma 3 270M, {ATTEMPTS} runs: named the manual's id {named}/{ATTEMPTS}, "
              f"expanded it {expanded}/{ATTEMPTS}, answered with the code only that page "
              f"holds {answered}/{ATTEMPTS}")
    detail = "\n".join(f"  {o[3]}" for o in outcomes)
    with capsys.disabled():
        print(f"\n{report}\n{detail}")
    assert named >= 1, f"{report}\n{detail}"
    if not expanded:
        # Measured 0/4 on 2026-12-07: the right id each time, a page past the end each time
        # (refused, saying how many pages there are): the model's choice, not shown as a pass.
        pytest.xfail(f"{report}: the model never asked for a page that exists")
    if not answered:
        # Measured 0/4 (see the report): the 270M model asks for the right page but echoes
        # the tool call or the plan instead of answering. Not a pass: shown as xfail.
        pytest.xfail(f"{report}: the model never answered from the page")
