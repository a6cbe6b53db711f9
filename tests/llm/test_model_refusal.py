"""A model that refuses is its own failure class, never "incomplete step → retry".

Each provider's real SDK client talks to a loopback server playing the provider; the engine
drives the run; the recommendation is read from the API and the run page.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.tools import ToolResult, tool
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

from .fakes import Answer, an_message, fake_provider, oa_completion

pytestmark = pytest.mark.django_db


@tool(effect="read")
def read_ticket(ctx, ticket: str) -> ToolResult:
    """Read a support ticket."""
    return ToolResult(facts={"ticket": ticket, "text": "..."}, summary="read")


@tool(effect="write", idempotent=True)
def post_reply(ctx, ticket: str, text: str) -> ToolResult:
    """Post a reply on a ticket."""
    return ToolResult(facts={"ticket": ticket}, summary="posted")


def _agent(name: str, *steps: str) -> None:
    if not registry.has(name, "1"):
        registry.register(Agent(name=name, version="1", system_prompt="You answer tickets.",
                                tools=[read_ticket, post_reply],
                                plan=[StepSpec(s) for s in steps]))


def _openai_refusal(text: str) -> Answer:
    answer = oa_completion(text="")
    answer.body["choices"][0]["message"]["refusal"] = text
    return answer


def _use(settings, fake, provider: str) -> None:
    settings.AGENTOPS_MODEL_PROVIDER = provider
    settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
    settings.AGENTOPS_MODEL_NAME = "fake-model"
    settings.AGENTOPS_MODEL_API_KEY = "sk-test"
    settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
    settings.AGENTOPS_MODEL_REPAIR_TURNS = 2


CASES = {
    "openai content_filter": ("openai", "/v1", lambda: oa_completion(finish="content_filter"),
                              "content filter"),
    "openai message.refusal": ("openai", "/v1",
                               lambda: _openai_refusal("I can't help with that request."),
                               "I can't help with that request."),
    "anthropic stop_reason refusal": ("anthropic", "", lambda: an_message(stop="refusal"),
                                      "the model refused to answer"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refusal_blocks_as_model_refused_and_is_not_retried(engine, settings, case):
    provider, prefix, answer, said = CASES[case]
    with fake_provider(prefix) as fake:
        _use(settings, fake, provider)
        fake.push(answer())
        _agent(f"refusing-{provider}", "answer")
        run = run_start(agent=f"refusing-{provider}", goal="Answer ticket T-1")
        assert drive(run) == "blocked"
    assert len(fake.requests) == 1  # no repair turn, no automatic retry of the same context
    run.refresh_from_db()
    assert run.attention_reason == "model_refused", run.attention_detail
    assert said in run.attention_detail
    api = client_for(make_role_users()["operator"]).get(f"/api/runs/{run.pk}").json()
    assert api["recommended_action"] == "skip"
    assert api["recommended_alternatives"] == ["terminate", "retry"]
    assert "gets the same refusal" in api["recommendation_why"]
    assert "rephrase the step or edit the agent's instructions" in api["recommendation_why"]
    failed = Event.objects.get(run=run, type="model.failed").data
    assert failed["category"] == "model_refused" and failed["usage"]["tokens"] > 0


def test_a_refusal_after_a_write_recommends_terminate_on_the_page(engine, settings):
    with fake_provider("/v1") as fake:
        _use(settings, fake, "openai")
        # the step posts a reply, then the model refuses to go on: a skip would forget it
        fake.push(oa_completion(calls=[("post_reply", {"ticket": "T-2", "text": "hi"})]),
                  _openai_refusal("I won't write that."))
        _agent("refusing-after-write", "reply", "close")
        run = run_start(agent="refusing-after-write", goal="Answer ticket T-2")
        assert drive(run) == "blocked"
    run.refresh_from_db()
    assert (run.attention_reason, run.recommended_action) == ("model_refused", "terminate")
    assert "skipping forgets the writes this step made (post_reply)" in run.recommendation_why
    users = make_role_users()
    html = client_for(users["operator"]).get(reverse("console:run", args=[run.pk])).content
    text = html.decode()
    assert "The model refused" in text and "I won&#x27;t write that." in text
    assert 'data-recommended="terminate"' in text


def test_a_streamed_openai_refusal_blocks_too(engine, settings):
    def chunk(delta, finish=None):
        return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [("", chunk({"role": "assistant", "refusal": "I can't "})),
              ("", chunk({"refusal": "do that."})), ("", chunk({}, "stop")), ("", "[DONE]")]
    with fake_provider("/v1") as fake:
        _use(settings, fake, "openai")
        settings.AGENTOPS_MODEL_STREAM = True
        fake.push(Answer(events=events))
        _agent("refusing-stream", "answer")
        run = run_start(agent="refusing-stream", goal="Answer ticket T-3")
        assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "model_refused" and "I can't do that." in run.attention_detail
