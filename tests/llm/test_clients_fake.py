"""Both model clients against a local server speaking each provider's protocol.

The real ``openai`` and ``anthropic`` SDKs talk HTTP to tests/llm/fakes.py: what they send
(tool schemas, tool_choice, paired tool results, strict schemas) and what they make of the
answers (tool calls, streamed text, repair turns, errors).
"""
from __future__ import annotations

from typing import Any

import anthropic
import pytest

from agentops.llm.anthropic_client import AnthropicClient
from agentops.llm.openai_compat import OpenAICompatClient
from agentops.llm.protocol import (
    AuthError,
    ContextOverflow,
    InvalidRequest,
    ModelOptions,
    ModelTimeout,
    RateLimited,
    ServerError,
)
from agentops.tools import tool

from .fakes import Answer, an_error, an_message, an_stream, fake_provider, oa_completion, oa_stream


@tool(effect="read")
def get_weather(ctx, city: str, unit: str | None = None) -> dict:
    """Get the weather.

    Args:
        city: the city name.
        unit: "C" or "F".
    """
    return {"city": city}


TOOLS = [get_weather.schema()]
CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": '{"temp": 21}'},
    {"role": "user", "content": "And now?"},
]


@pytest.fixture
def openai_fake():
    with fake_provider("/v1") as fake:
        yield fake


@pytest.fixture
def anthropic_fake():
    with fake_provider() as fake:
        yield fake


def oa(fake, **options: Any) -> OpenAICompatClient:
    return OpenAICompatClient(fake.base_url, "sk-x", "fake-model", timeout_s=5,
                              options=ModelOptions(**options))


def an(fake, **options: Any) -> AnthropicClient:
    return AnthropicClient(api_key="sk-ant-x", model="claude-fake", base_url=fake.base_url,
                           timeout_s=5, options=ModelOptions(**options))


def test_openai_named_tool_choice_and_strict_schema_go_on_the_wire(openai_fake):
    openai_fake.push(oa_completion(calls=[("get_weather", {"city": "Paris", "unit": None})]))
    reply = oa(openai_fake).complete(messages=CONVERSATION, tools=[get_weather.schema(strict=True)],
                                     tool_choice="get_weather")
    sent = openai_fake.requests[0]["json"]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    fn = sent["tools"][0]["function"]
    assert fn["strict"] is True and fn["parameters"]["required"] == ["city", "unit"]
    assert reply.tool_calls[0].arguments == {"city": "Paris", "unit": None}
    assert get_weather.validate(reply.tool_calls[0].arguments) == {"city": "Paris", "unit": None}
    assert "default" not in str(fn["parameters"])


def test_openai_streams_text_and_assembles_a_tool_call(openai_fake):
    openai_fake.push(oa_stream(["It is ", "sunny ", "and "], call=("get_weather", '{"city": "Lyon"}')))
    pieces: list[str] = []
    reply = oa(openai_fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                                  on_text=pieces.append)
    assert pieces == ["It is ", "sunny ", "and "] and reply.text == "It is sunny and "
    assert reply.tool_calls[0].name == "get_weather"
    assert reply.tool_calls[0].arguments == {"city": "Lyon"}
    assert reply.usage.prompt_tokens == 9 and reply.usage.completion_tokens == 4
    assert openai_fake.requests[0]["json"]["stream"] is True


def test_openai_repair_turn_sends_the_problem_back(openai_fake):
    openai_fake.push(oa_completion(calls=[("get_weather", '{"town": "Paris"')]),
                     oa_completion(calls=[("get_weather", {"city": "Paris"})]))
    reply = oa(openai_fake, repair_turns=1).complete(messages=CONVERSATION, tools=TOOLS,
                                                     tool_choice="required")
    assert reply.tool_calls[0].arguments == {"city": "Paris"}
    assert len(reply.repairs) == 1 and "not a JSON object" in reply.repairs[0]
    assert reply.usage.prompt_tokens == 24  # both calls counted
    second = openai_fake.requests[1]["json"]["messages"]
    assert second[-1]["role"] == "user" and "cannot be used" in second[-1]["content"]


def test_openai_repair_gives_up_after_its_turns(openai_fake):
    bad = oa_completion(text="I think it is sunny.")
    openai_fake.push(bad, bad, bad)
    reply = oa(openai_fake, repair_turns=2).complete(messages=CONVERSATION, tools=TOOLS,
                                                     tool_choice="required")
    assert not reply.tool_calls and len(reply.repairs) == 2
    assert len(openai_fake.requests) == 3
    assert "a tool call was required" in reply.repairs[0]


def test_anthropic_translates_messages_tools_and_choice(anthropic_fake):
    anthropic_fake.push(an_message(text="Checking.", calls=[("get_weather", {"city": "Paris"})]))
    reply = an(anthropic_fake).complete(messages=CONVERSATION, tools=TOOLS,
                                        tool_choice="get_weather", max_tokens=300)
    req = anthropic_fake.requests[0]
    assert req["path"] == "/v1/messages" and "anthropic-version" in req["headers"]
    assert "sk-ant-x" in (req["headers"].get("x-api-key", "") + req["headers"].get("authorization", ""))
    sent = req["json"]
    assert sent["system"] == "You are terse." and sent["max_tokens"] == 300
    assert sent["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert sent["tools"][0]["name"] == "get_weather"
    assert sent["tools"][0]["input_schema"]["properties"]["city"]["description"] == "the city name."
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant", "user"]  # tool result + next question share one turn
    tool_use = sent["messages"][1]["content"][0]
    assert tool_use == {"type": "tool_use", "id": "call_a", "name": "get_weather",
                        "input": {"city": "Paris"}}
    result, question = sent["messages"][2]["content"]
    assert result == {"type": "tool_result", "tool_use_id": "call_a", "content": '{"temp": 21}'}
    assert question == {"type": "text", "text": "And now?"}
    assert reply.text == "Checking." and reply.finish_reason == "tool_calls"
    call = reply.tool_calls[0]
    assert (call.name, call.arguments, call.provider_id) == ("get_weather", {"city": "Paris"}, "toolu_0")
    assert reply.usage.prompt_tokens == 20 and reply.usage.completion_tokens == 7


def test_anthropic_required_choice_is_any_and_strict_is_passed(anthropic_fake):
    anthropic_fake.push(an_message(calls=[("get_weather", {"city": "Oslo", "unit": None})]))
    an(anthropic_fake).complete(messages=CONVERSATION, tools=[get_weather.schema(strict=True)],
                                tool_choice="required")
    sent = anthropic_fake.requests[0]["json"]
    assert sent["tool_choice"] == {"type": "any"} and sent["tools"][0]["strict"] is True


def test_anthropic_streams_text(anthropic_fake):
    anthropic_fake.push(an_stream(["Sun", "ny in ", "Paris."]))
    pieces: list[str] = []
    reply = an(anthropic_fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                                     on_text=pieces.append)
    assert pieces == ["Sun", "ny in ", "Paris."] and reply.text == "Sunny in Paris."
    assert reply.usage.completion_tokens == 6 and anthropic_fake.requests[0]["json"]["stream"]


def test_anthropic_repair_turn(anthropic_fake):
    anthropic_fake.push(an_message(calls=[("get_weather", {"city": 7})]),
                        an_message(calls=[("get_weather", {"city": "Rome"})]))
    reply = an(anthropic_fake, repair_turns=1).complete(messages=CONVERSATION, tools=TOOLS,
                                                        tool_choice="required")
    assert reply.tool_calls[0].arguments == {"city": "Rome"}
    assert "7 is not of type 'string'" in reply.repairs[0]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("answer", "error", "code"), [
    (an_error(429, "rate_limit_error", "slow down"), RateLimited, "rate_limit_error"),
    (an_error(529, "overloaded_error", "Overloaded"), ServerError, "overloaded_error"),
    (an_error(500, "api_error", "Internal"), ServerError, "api_error"),
    (an_error(409, "conflict", "busy"), ServerError, "conflict"),
    (an_error(408, "timeout_error", "slow"), ModelTimeout, "timeout_error"),
    (an_error(401, "authentication_error", "invalid x-api-key"), AuthError, "authentication_error"),
    (an_error(403, "permission_error", "no"), AuthError, "permission_error"),
    (an_error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
     ContextOverflow, "invalid_request_error"),
    (an_error(413, "request_too_large", "Request exceeds the maximum size"), ContextOverflow,
     "request_too_large"),
    (an_error(400, "invalid_request_error", "messages: roles must alternate"), InvalidRequest,
     "invalid_request_error"),
    (an_error(404, "not_found_error", "model: claude-fake"), InvalidRequest, "not_found_error"),
    (Answer(502, raw=b"<html>Bad Gateway</html>"), ServerError, ""),
    (Answer(400, {"error": "the prompt is too long"}), ContextOverflow, ""),
    (Answer(400, {"type": "error", "error": {"type": "bad type!", "message": "x"}}), InvalidRequest,
     ""),
])
def test_anthropic_errors_map_to_model_errors(anthropic_fake, answer, error, code, stream):
    """A plain call (our own HTTP path) and a streamed one (the SDK's) map each failure alike."""
    answer.headers = {"retry-after": "3"} if answer.status == 429 else {}
    anthropic_fake.push(answer)
    with pytest.raises(error) as caught:
        an(anthropic_fake, stream=stream).complete(messages=CONVERSATION, tools=TOOLS,
                                                   on_text=lambda piece: None)
    assert "sk-ant-x" not in str(caught.value) and "127.0.0.1" not in str(caught.value)
    assert caught.value.status_code == answer.status and caught.value.provider_code == code
    assert str(caught.value).endswith(f"HTTP {answer.status} ({code})" if code else f"HTTP {answer.status}")
    if error is RateLimited:
        assert caught.value.retry_after == 3


def test_anthropic_plain_call_sends_what_the_sdk_sends(anthropic_fake):
    """Headers (identity, anthropic-version, the key, retry count, read timeout) and body of a
    plain call are those of the SDK's own ``messages.create`` with the same parameters."""
    anthropic_fake.push(an_message(text="ok"), an_message(text="ok"))
    an(anthropic_fake).complete(messages=CONVERSATION, tools=TOOLS, tool_choice="auto")
    ours = anthropic_fake.requests[0]
    sdk = anthropic.Anthropic(api_key="sk-ant-x", base_url=anthropic_fake.base_url, timeout=5,
                              max_retries=0)
    sdk.messages.create(**ours["json"])
    theirs = anthropic_fake.requests[1]
    assert ours["path"] == theirs["path"] == "/v1/messages" and ours["json"] == theirs["json"]
    # x-stainless-timeout is the SDK's str() of an unset option ("NOT_GIVEN"): not sent.
    skip = {"host", "x-stainless-timeout"}
    assert {k: v for k, v in ours["headers"].items() if k not in skip} == {
        k: v for k, v in theirs["headers"].items() if k not in skip}
    assert ours["json"] == {"model": "claude-fake", "max_tokens": 1024, "system": "You are terse.",
                            "tools": [{"name": "get_weather", "description": "Get the weather.",
                                       "input_schema": TOOLS[0]["function"]["parameters"]}],
                            "tool_choice": {"type": "auto"},
                            "messages": ours["json"]["messages"]}


def test_anthropic_base_url_path_is_kept():
    with fake_provider("/proxy/anthropic") as fake:
        fake.push(an_message(text="ok"))
        assert an(fake).complete(messages=CONVERSATION, tools=TOOLS).text == "ok"
        assert fake.requests[0]["path"] == "/proxy/anthropic/v1/messages"


@pytest.mark.parametrize("answer", [
    Answer(raw=b"not json"),
    Answer(body=["a", "list"]),
    Answer(body={"type": "message", "content": ["text"], "usage": {}}),
    Answer(body={"type": "message", "content": [], "usage": "none"}),
])
def test_anthropic_malformed_200_is_server_error(anthropic_fake, answer):
    anthropic_fake.push(answer)
    with pytest.raises(ServerError, match="^server_error: (reply is not JSON|malformed reply)$"):
        an(anthropic_fake).complete(messages=CONVERSATION, tools=TOOLS)


def test_anthropic_sparse_200_reads_as_empty_reply(anthropic_fake):
    anthropic_fake.push(Answer(body={"content": [{"type": "tool_use", "name": "get_weather",
                                                  "id": "toolu_9", "input": "Paris"}]}))
    reply = an(anthropic_fake).complete(messages=CONVERSATION, tools=TOOLS)
    assert (reply.text, reply.finish_reason, reply.model, reply.usage.prompt_tokens) == ("", "stop", "", 0)
    call = reply.tool_calls[0]
    assert (call.arguments, call.raw_arguments, call.provider_id) == (None, '"Paris"', "toolu_9")


def test_anthropic_transport_failures(anthropic_fake):
    anthropic_fake.push(Answer(body={}, delay_s=1.0))
    slow = AnthropicClient(api_key="k", model="m", base_url=anthropic_fake.base_url, timeout_s=0.2)
    with pytest.raises(ModelTimeout, match="^timeout: no answer in time$"):
        slow.complete(messages=CONVERSATION, tools=TOOLS)
    with fake_provider() as closed:
        url = closed.base_url
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        AnthropicClient(api_key="k", model="m", base_url=url).complete(messages=CONVERSATION, tools=[])
