"""A streamed reply cut before its end marker is a transport failure, never a reply.

A real loopback server (tests/llm/fakes.py) closes the connection at several points of a
stream; the real ``openai`` / ``anthropic`` SDK clients must raise a retryable ServerError,
and the engine must retry the turn by that class, then block, never record the fragment.
"""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.protocol import ServerError
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

from .fakes import Answer, an_stream, fake_provider, oa_stream
from .test_clients_fake import CONVERSATION, TOOLS, an, oa


def _cut(answer: Answer, keep: int, tail: bytes = b"") -> Answer:
    """Return ``answer`` with only its first ``keep`` events, then ``tail``, then EOF."""
    return Answer(events=answer.events[:keep], tail=tail)


# oa_stream(["Hel", "lo", " world"]): 3 text chunks, the finish chunk, usage, [DONE].
OA_CUTS = {
    "headers_only": (0, b""),
    "after_one_chunk": (1, b""),
    "after_two_chunks": (2, b""),
    "mid_event": (2, b'data: {"id": "c1", "object": "chat.comp'),
    "after_all_text": (3, b""),
}


@pytest.mark.parametrize("keep,tail", OA_CUTS.values(), ids=OA_CUTS.keys())
def test_openai_stream_cut_is_a_server_error(keep, tail):
    with fake_provider("/v1") as fake:
        fake.push(_cut(oa_stream(["Hel", "lo", " world"]), keep, tail))
        pieces: list[str] = []
        with pytest.raises(ServerError, match="stream ended before its end") as err:
            oa(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                           on_text=pieces.append)
    assert err.value.retryable and err.value.category == "server_error"


def test_openai_stream_cut_inside_a_tool_call():
    with fake_provider("/v1") as fake:
        # Text, then the first half of the call's arguments; the connection closes.
        fake.push(_cut(oa_stream(["Checking"], call=("get_weather", '{"city": "Paris"}')), 2))
        with pytest.raises(ServerError, match="no finish_reason and no \\[DONE\\]"):
            oa(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                           on_text=lambda _: None)


def test_openai_stream_cut_after_finish_reason_keeps_the_whole_reply():
    with fake_provider("/v1") as fake:
        # The finish chunk arrived: the reply is whole even though usage and [DONE] did not.
        fake.push(_cut(oa_stream(["Hel", "lo"]), 3))
        reply = oa(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                               on_text=lambda _: None)
    assert reply.text == "Hello" and reply.finish_reason == "stop"


def test_openai_stream_done_without_finish_reason_is_a_reply():
    with fake_provider("/v1") as fake:
        whole = oa_stream(["Hel", "lo"])
        fake.push(Answer(events=[*whole.events[:2], ("", "[DONE]")]))
        reply = oa(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                               on_text=lambda _: None)
    assert reply.text == "Hello" and reply.finish_reason == "stop"


# an_stream(["Hel", "lo"]): message_start, content_block_start, 2 deltas, content_block_stop,
# message_delta (stop_reason), message_stop.
AN_CUTS = {
    "headers_only": (0, b""),
    "after_message_start": (1, b""),
    "after_one_delta": (3, b""),
    "mid_event": (3, b"event: content_block_delta\ndata: {\"type\": \"content_blo"),
    "before_message_stop": (6, b""),
}


@pytest.mark.parametrize("keep,tail", AN_CUTS.values(), ids=AN_CUTS.keys())
def test_anthropic_stream_cut_is_a_server_error(keep, tail):
    with fake_provider() as fake:
        fake.push(_cut(an_stream(["Hel", "lo"]), keep, tail))
        with pytest.raises(ServerError, match="stream ended before its end") as err:
            an(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                           on_text=lambda _: None)
    assert err.value.retryable and err.value.category == "server_error"


def _agent(name: str) -> Agent:
    return registry.register(Agent(name=name, version="1", system_prompt="Say hello.",
                                   tools=[], plan=[StepSpec("greet", title="Greet")]))


def _stream_settings(settings, fake, provider: str) -> None:
    settings.AGENTOPS_MODEL_PROVIDER = provider
    settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
    settings.AGENTOPS_MODEL_NAME = "fake-model"
    settings.AGENTOPS_MODEL_API_KEY = "sk-x"
    settings.AGENTOPS_MODEL_STREAM = True


@pytest.mark.django_db
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_cut_is_retried_then_the_whole_reply_recorded(engine, settings, provider):
    whole, prefix = (oa_stream, "/v1") if provider == "openai" else (an_stream, "")
    with fake_provider(prefix) as fake:
        _stream_settings(settings, fake, provider)
        fake.push(_cut(whole(["Hel", "lo", " world"]), 2),
                  whole(["Hel", "lo", " world"]))
        _agent(f"cut-{provider}")
        run = run_start(agent=f"cut-{provider}", goal="Greet")
        assert drive(run) == "succeeded"
    failed = Event.objects.get(run=run, type="model.failed").data
    assert failed["category"] == "server_error"
    assert "stream ended before its end" in failed["message"]
    replied = [e.data["text"] for e in Event.objects.filter(run=run, type="model.replied")
               if e.data["step"] == "greet"]
    assert replied == ["Hello world"]  # the fragment was never recorded as a reply


@pytest.mark.django_db
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_cut_every_time_blocks_retries_exhausted(engine, settings, provider):
    whole, prefix = (oa_stream, "/v1") if provider == "openai" else (an_stream, "")
    settings.AGENTOPS_STEP_RETRY_LIMIT = 2
    with fake_provider(prefix) as fake:
        _stream_settings(settings, fake, provider)
        fake.push(*[_cut(whole(["Hel", "lo"]), 2) for _ in range(3)])
        _agent(f"cut-always-{provider}")
        run = run_start(agent=f"cut-always-{provider}", goal="Greet")
        assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "retry_exhausted"
    assert "stream ended before its end" in run.attention_detail
    assert not Event.objects.filter(run=run, type="step.completed", data__step="greet").exists()


_NOT_UTF8 = b'"delta": {"content": "\xff\xfe"}, "finish_reason": null}]}\n\n'


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_garbage_is_a_server_error(provider):
    """Bytes that are not UTF-8 mid-stream: the provider's fault, retried as a server error."""
    whole, prefix, client = ((oa_stream, "/v1", oa) if provider == "openai"
                             else (an_stream, "", an))
    event = b"" if provider == "openai" else b"event: content_block_delta\n"
    with fake_provider(prefix) as fake:
        fake.push(Answer(events=whole(["Hel", "lo"]).events[:2],
                         tail=event + b'data: {"id": "c1", "choices": [{"index": 0, ' + _NOT_UTF8))
        with pytest.raises(ServerError, match="not UTF-8") as err:
            client(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                               on_text=lambda _: None)
    assert err.value.retryable


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_garbage_json_is_a_server_error(provider):
    whole, prefix, client = ((oa_stream, "/v1", oa) if provider == "openai"
                             else (an_stream, "", an))
    event = b"" if provider == "openai" else b"event: content_block_delta\n"
    with fake_provider(prefix) as fake:
        fake.push(Answer(events=whole(["Hel", "lo"]).events[:2],
                         tail=event + b"data: {not json at all\n\n"))
        with pytest.raises(ServerError, match="not JSON"):
            client(fake, stream=True).complete(messages=CONVERSATION, tools=TOOLS,
                                               on_text=lambda _: None)
