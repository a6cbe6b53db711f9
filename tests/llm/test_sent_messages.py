"""A request body written from kept message texts is the very JSON ``json.dumps`` writes.

The OpenAI-compatible client writes its request body itself: the messages of a run's recent
turns (SentMessages, made by runs.engine.core.context) keep their JSON text from the first
call that sent them. These tests read what a real local server received.
"""
from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentops.llm.openai_compat import OpenAICompatClient, _body_json
from agentops.llm.protocol import ModelOptions, SentMessage, messages_json
from agentops.tools import ToolSpec, tool
from runs.engine.core import context as ctx
from runs.engine.runtime import model_turn

from .fakes import fake_provider, oa_completion

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                       | _text, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(_text, inner, max_size=4), max_leaves=12)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                  "content": _text}, optional={"extra": _values})


def noop_spec() -> ToolSpec:
    """Return a new ToolSpec of a tool with an optional argument (strict makes it nullable)."""

    @tool(effect="read")
    def lookup(ctx, q: str, limit: int = 3) -> dict:
        """Look ``q`` up."""
        return {}

    return lookup


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_message, st.booleans()), max_size=6))
def test_messages_json_is_json_dumps_for_any_messages(items) -> None:
    messages = [SentMessage(m) if sent else m for m, sent in items]
    assert messages_json(messages) == json.dumps(messages)
    assert messages_json(messages) == json.dumps(messages)  # the kept texts, read again


def test_a_sent_message_is_not_edited_and_its_copies_are_plain() -> None:
    m = SentMessage(role="user", content="héllo")
    m.wire_json()
    for edit in (lambda: m.__setitem__("content", "x"), lambda: m.update(content="x"),
                 lambda: m.pop("content"), lambda: m.setdefault("x", 1), m.clear,
                 lambda: m.__delitem__("role"), m.popitem):
        with pytest.raises(TypeError, match="not edited once made"):
            edit()
    assert m.wire_json() == json.dumps({"role": "user", "content": "héllo"})
    for twin in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m)), dict(m)):
        assert type(twin) is dict and twin == m
        twin["content"] = "edited"  # a copy is the caller's to edit
    assert m["content"] == "héllo"


def test_the_server_reads_the_same_bytes_json_dumps_writes_call_after_call() -> None:
    turn = {"n": 1, "text": "looking ✓", "calls": [
        {"id": "c1", "name": "lookup", "args": {"q": "naïve \u2028 \"quoted\""},
         "result": {"status": "succeeded", "output": {"ok": True, "note": "日本"}}}]}
    kept = ctx._turn_messages(turn)  # what the engine sends for a recent turn, every call
    assert all(type(m) is SentMessage for m in kept)
    with fake_provider("/v1") as fake:
        client = OpenAICompatClient(fake.base_url, "sk-x", "fake-model", timeout_s=5,
                                    options=ModelOptions())
        for i in range(3):
            fake.push(oa_completion(text=f"answer {i}"))
            messages = [{"role": "system", "content": "Be brief."}, *kept,
                        {"role": "user", "content": f"turn {i} — now?"}]
            reply = client.complete(messages=messages, tools=[], tool_choice=None)
            assert reply.text == f"answer {i}"
            body = {"model": "fake-model", "messages": json.loads(json.dumps(messages))}
            assert fake.requests[-1]["raw"] == json.dumps(body).encode()
            assert fake.requests[-1]["json"]["messages"][1:-1] == [dict(m) for m in kept]


_bodies = st.lists(st.tuples(st.sampled_from(["model", "tools", "tool_choice", "max_tokens",
                                              "messages", "temperature", 1]),
                             _values | st.lists(st.tuples(_message, st.booleans()), max_size=3)),
                   max_size=6)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_bodies)
def test_a_request_body_is_json_dumps_whatever_its_keys_and_values(items) -> None:
    body = {}
    for key, value in items:  # a list of (message, sent) pairs: SentMessages among dicts
        if isinstance(value, list) and value and all(
                isinstance(v, tuple) for v in value):
            value = [SentMessage(m) if sent else m for m, sent in value]
        body[key] = value
    assert _body_json(body) == json.dumps(body)
    assert _body_json(body) == json.dumps(body)  # the kept texts, read again


def test_the_server_reads_json_dumps_of_kept_tool_schemas_call_after_call() -> None:
    """The tool schemas a run's model turns send (made once per tool, their text kept)."""
    spec = noop_spec()
    for strict in (False, True):
        tools = [model_turn._schema(spec, strict)]
        assert tools[0] is model_turn._schema(spec, strict)  # the same object every call
        assert tools[0] == spec.schema(strict=strict)
        with pytest.raises(TypeError, match="not edited once made"):
            tools[0]["function"]["name"] = "other"
        with fake_provider("/v1") as fake:
            client = OpenAICompatClient(fake.base_url, "sk-x", "fake-model", timeout_s=5,
                                        options=ModelOptions(max_tokens=9))
            for i in range(2):
                fake.push(oa_completion(text=f"answer {i}"))
                messages = [{"role": "user", "content": f"turn {i} — now?"}]
                client.complete(messages=messages, tools=tools, tool_choice="required")
                body = {"model": "fake-model", "tools": json.loads(json.dumps(tools)),
                        "tool_choice": "required", "max_tokens": 9, "messages": messages}
                assert fake.requests[-1]["raw"] == json.dumps(body).encode()
    assert model_turn._schema(spec, True) != model_turn._schema(spec, False)
    assert model_turn._schema(noop_spec(), False) is not model_turn._schema(spec, False)
