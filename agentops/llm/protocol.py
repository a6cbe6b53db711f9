"""What the engine sends a model and what it gets back, independent of any provider.

Messages are plain OpenAI-style dicts ({"role", "content", "tool_calls", "tool_call_id"}),
tool schemas are OpenAI function schemas. A client returns a ModelReply or raises one of the
typed ModelError subclasses below; the failure policy reads their fields, never their text.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, Protocol, runtime_checkable

from agentops.jsonstate import json_encoder

TextSink = Callable[[str], None]
# finish reasons that mean the model (or its provider's filter) refused to answer
REFUSALS = ("content_filter", "refusal")


@dataclass(frozen=True)
class Usage:
    """Tokens a call consumed, and its cost in micro-dollars when known."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_micros: int = 0

    @property
    def total_tokens(self) -> int:
        """Return prompt + completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for.

    ``arguments`` is the parsed JSON object, or None when the model sent text that is not a
    JSON object; ``raw_arguments`` keeps what it sent so the error can say what was wrong.
    """

    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""
    provider_id: str = ""


@dataclass(frozen=True)
class ModelReply:
    """A model's answer: text and/or tool calls, usage and why it stopped.

    ``repairs`` lists what was wrong with earlier answers of the same call that a repair turn
    sent back to the model (see ModelOptions.repair_turns); usage covers them all.
    ``refusal`` is what the provider said when the model refused (OpenAI's
    ``message.refusal``); a refusal also shows as ``finish_reason`` "refusal" (Anthropic's
    ``stop_reason: "refusal"``, OpenAI's refusal field) or "content_filter".
    """

    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    repairs: tuple[str, ...] = ()
    refusal: str = ""

    @property
    def refused(self) -> bool:
        """Return True when the model refused and left nothing usable (no tool call)."""
        return not self.tool_calls and (bool(self.refusal) or self.finish_reason in REFUSALS)


@dataclass(frozen=True)
class ModelOptions:
    """How the engine and a client talk to a model; the same for every provider.

    Attributes:
        tool_choice: "auto" lets the model decide; "required" makes it call a tool on a
            step's first turn (and, after a failed call, up to ``force_turns``), naming the
            tool when the step offers exactly one, then offers no tools so it answers in text
            and the step ends. Small models (Gemma 3 270M) only call tools this way.
        force_turns: the last turn of a step on which a tool is still forced after a failure.
        strict: send tool schemas in the providers' strict form (every property required,
            optional ones nullable, no extra keys), so the provider constrains the arguments.
        repair_turns: when a reply's tool call is unusable (not JSON, unknown tool, arguments
            the schema refuses, no call when one was required), send the problem back to the
            model this many times within the same call before returning the reply.
        stream: stream the reply's text as it is generated (to the run page).
        max_tokens: cap on the tokens of each reply (None: the provider's default).
    """

    tool_choice: Literal["auto", "required"] = "auto"
    force_turns: int = 2
    strict: bool = False
    repair_turns: int = 0
    stream: bool = False
    max_tokens: int | None = None


# As json.dumps with its defaults (what a request body holds), without its per-call set-up.
json_text = json_encoder()


class SentMessage(dict):  # type: ignore[type-arg]
    """A message that is never edited once made, so its JSON is made once, when first sent.

    The messages of a run's recent turns are the same objects from one model call to the next
    (runs.engine.core.context keeps them); a client that writes the request body itself
    (agentops.llm.openai_compat) takes their text from here instead of encoding them again at
    every call. Editing one raises TypeError; a copy is a plain dict.
    """

    __slots__ = ("_json",)

    def wire_json(self) -> str:
        """Return ``json.dumps(self)``, made at the first call."""
        try:
            return self._json  # type: ignore[no-any-return]
        except AttributeError:
            text = self._json = json_text(self)
            return text

    def _edited(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a SentMessage is not edited once made (its JSON is kept): copy it")

    __setitem__ = __delitem__ = __ior__ = _edited
    update = pop = popitem = setdefault = clear = _edited

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)


def messages_json(messages: list[dict[str, Any]]) -> str:
    """Return ``json.dumps(messages)``, taking each SentMessage's text as it was made."""
    return "[" + ", ".join(m.wire_json() if type(m) is SentMessage else json_text(m)
                           for m in messages) + "]"


@runtime_checkable
class ModelClient(Protocol):
    """Anything that can answer a chat turn with optional tool calls."""

    context_window: int

    def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ModelReply:
        """Return the model's reply to ``messages`` or raise a ModelError subclass.

        ``tool_choice`` is "auto", "required", "none" or a tool name; ``on_text`` receives
        the reply's text in pieces while it streams (clients that cannot stream ignore it).
        A client may carry ``options: ModelOptions``; the engine reads them.
        """
        ...


class ModelError(Exception):
    """Base of model-call errors; ``category`` and ``retryable`` drive the failure policy."""

    category = "model_error"
    retryable = False

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message or self.category)
        self.retry_after = retry_after


class RateLimited(ModelError):
    """The provider asked us to slow down (HTTP 429); honour ``retry_after`` seconds."""

    category = "rate_limited"
    retryable = True


class ModelTimeout(ModelError):
    """The call did not answer in time."""

    category = "timeout"
    retryable = True


class ServerError(ModelError):
    """The provider failed (5xx, dropped connection)."""

    category = "server_error"
    retryable = True


class ContextOverflow(ModelError):
    """The prompt is longer than the model's window."""

    category = "context_overflow"
    retryable = True


class InvalidRequest(ModelError):
    """The provider refused the request as malformed (400 other than context length)."""

    category = "invalid_request"


class AuthError(ModelError):
    """The provider refused our credentials (401/403)."""

    category = "auth_error"


class InvalidOutput(ModelError):
    """The model answered, but not in a form we can use (bad tool arguments, cut off)."""

    category = "invalid_output"
    retryable = True
