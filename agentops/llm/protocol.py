"""What the engine sends a model and what it gets back, independent of any provider.

Messages are plain OpenAI-style dicts ({"role", "content", "tool_calls", "tool_call_id"}),
tool schemas are OpenAI function schemas. A client returns a ModelReply or raises one of the
typed ModelError subclasses below; the failure policy reads their fields, never their text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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
    """A model's answer: text and/or tool calls, usage and why it stopped."""

    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""


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
    ) -> ModelReply:
        """Return the model's reply to ``messages`` or raise a ModelError subclass."""
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
