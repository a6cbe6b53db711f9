"""OpenAICompatClient against a real llama.cpp server running Gemma 3 270M.

The model is tiny: it emits a tool call only when one is forced and often fills in wrong
values, so these tests check the shape of what comes back, never the values.
"""

from __future__ import annotations

import pytest

from agentops.llm.openai_compat import OpenAICompatClient
from agentops.llm.protocol import AuthError, ContextOverflow

from .conftest import LLAMA_API_KEY, N_CTX

# The first test may build llama.cpp (minutes) inside its fixture setup.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}


def client(base_url: str, api_key: str = "") -> OpenAICompatClient:
    """Return a client for the real server; CPU inference is slow, so the timeout is generous."""
    return OpenAICompatClient(
        base_url, api_key, "gemma-3-270m", timeout_s=120, context_window=N_CTX
    )


def test_forced_tool_call_is_parsed(llama_server: str) -> None:
    reply = client(llama_server).complete(
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="get_weather",
        max_tokens=128,
    )
    assert reply.tool_calls, reply
    call = reply.tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(call.arguments, dict), call.raw_arguments
    assert reply.usage.prompt_tokens > 0
    assert reply.usage.completion_tokens > 0


def test_tool_call_cut_by_max_tokens_keeps_raw_arguments(llama_server: str) -> None:
    # llama.cpp says finish_reason "tool_calls" here, not "length": parsing must not rely on it.
    reply = client(llama_server).complete(
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="get_weather",
        max_tokens=4,
    )
    call = reply.tool_calls[0]
    assert call.arguments is None
    assert call.raw_arguments.startswith("{")


def test_prompt_longer_than_window_is_context_overflow(llama_server: str) -> None:
    too_long = "word " * (N_CTX * 2)
    with pytest.raises(ContextOverflow):
        client(llama_server).complete(
            messages=[{"role": "user", "content": too_long}], tools=[], max_tokens=16
        )


@pytest.mark.parametrize("api_key", ["wrong-key", ""])
def test_wrong_or_missing_key_is_auth_error(llama_server_with_key: str, api_key: str) -> None:
    with pytest.raises(AuthError) as caught:
        client(llama_server_with_key, api_key).complete(
            messages=[{"role": "user", "content": "hi"}], tools=[], max_tokens=8
        )
    assert LLAMA_API_KEY not in str(caught.value)
    assert not api_key or api_key not in str(caught.value)


def test_right_key_is_accepted(llama_server_with_key: str) -> None:
    reply = client(llama_server_with_key, LLAMA_API_KEY).complete(
        messages=[{"role": "user", "content": "Say hello."}], tools=[], max_tokens=8
    )
    assert reply.usage.completion_tokens > 0


def test_streamed_text_arrives_in_pieces_and_matches_the_reply(llama_server: str) -> None:
    from agentops.llm.protocol import ModelOptions

    streaming = OpenAICompatClient(llama_server, "", "gemma-3-270m", timeout_s=120,
                                   context_window=N_CTX, options=ModelOptions(stream=True))
    # The server samples (and its sampler state depends on the requests before this one), so
    # the small model often ends its reply at once (about one reply in two with
    # llama-cpp-python 0.3.36; eight in a row were seen in CI): ask again, up to sixteen
    # times, three different asks in turn. What is checked is the streaming: whatever text arrives, arrives in pieces equal to the reply.
    asks = ("Count from one to ten.", "Name three colours.", "Say hello to the team.")
    for attempt in range(16):
        pieces: list[str] = []
        ask = f"{asks[attempt % len(asks)]}{' ' * (attempt // len(asks))}"
        reply = streaming.complete(
            messages=[{"role": "user", "content": ask}],
            tools=[], max_tokens=32, on_text=pieces.append)
        assert "".join(pieces) == reply.text
        if reply.text.strip():
            break
    assert len(pieces) > 1 and reply.text.strip(), "sixteen empty replies from the model"


def test_required_choice_with_repair_turn_returns_a_usable_call(llama_server: str) -> None:
    from agentops.llm.protocol import ModelOptions

    repaired = OpenAICompatClient(llama_server, "", "gemma-3-270m", timeout_s=120,
                                  context_window=N_CTX, options=ModelOptions(repair_turns=2))
    reply = repaired.complete(
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER], tool_choice="get_weather", max_tokens=128)
    from agentops.llm.repair import reply_problems

    assert reply.tool_calls and reply.tool_calls[0].name == "get_weather"
    # Either the reply is usable, or both repair turns were spent trying to make it so.
    problems = reply_problems(reply, tools=[WEATHER], tool_choice="get_weather")
    assert not problems or len(reply.repairs) == 2, (problems, reply.repairs)
