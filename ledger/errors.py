"""Errors of the ledger: tool failures with their retry class, and ledger conflicts.

Tool authors raise ToolError subclasses (or let the engine classify what they raise); the
failure policy reads ``category``, ``retryable`` and ``next_retry_delay``, never message text.
"""
from __future__ import annotations

from typing import Any

from agentops.errors import AgentOpsError, Conflict, InvalidInput, NotFound


class LedgerError(AgentOpsError):
    """Base of ledger errors."""


class ToolCallNotFound(NotFound, LedgerError):
    """No tool call with that id."""

    code = "tool_call_not_found"


class DuplicateToolCall(Conflict, LedgerError):
    """A ledger row with this idempotency key or tool_call_id already exists."""

    code = "duplicate_tool_call"


class IllegalToolCallTransition(Conflict, LedgerError):
    """A tool-call status change the table does not allow."""

    code = "illegal_transition"


class ArtifactCorrupted(LedgerError):
    """An artifact's bytes no longer match its sha256; it is never returned."""

    code = "artifact_corrupted"


class ArtifactMissing(NotFound, LedgerError):
    """No artifact with that sha256 is stored."""

    code = "artifact_missing"


class SealedUnreadable(LedgerError):
    """Sealed arguments cannot be opened with any seal key (a key was dropped too early)."""

    code = "sealed_unreadable"
    http_status = 500


class ToolError(Exception):
    """An error a tool reports; what the model sees is ``model_message`` and the fields.

    ``ambiguous`` means the side effect may or may not have happened (a timeout after send).
    """

    category = "tool_error"
    retryable = False
    ambiguous = False

    def __init__(
        self,
        message: str = "",
        *,
        next_retry_delay: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message or self.category)
        self.model_message = message or self.category
        self.next_retry_delay = next_retry_delay
        self.details = details or {}


class ToolTransient(ToolError):
    """A temporary failure (5xx, overloaded); retry with backoff."""

    category = "transient"
    retryable = True


class ToolRateLimited(ToolError):
    """The tool's backend asked us to slow down."""

    category = "rate_limited"
    retryable = True


class ToolTimeout(ToolError):
    """The tool did not answer in time; for a write the outcome is ambiguous."""

    category = "timeout"
    retryable = True
    ambiguous = True


class ToolPermanent(ToolError):
    """A permanent failure (4xx, permission denied, business rejection): do not retry."""

    category = "permanent"


class ToolPermissionDenied(ToolPermanent):
    """The tool's backend refused for lack of permission."""

    category = "permission"


class ToolNotFound(ToolPermanent):
    """What the tool was asked for does not exist (an unknown order, a deleted file)."""

    category = "not_found"


class ToolBusinessRejection(ToolPermanent):
    """The backend refused on business grounds (refund window closed, limit exceeded)."""

    category = "business_rejection"


class ToolCredentialsRefused(ToolPermanent):
    """The backend refused our credentials (API key, token): every call fails until fixed."""

    category = "credentials"


class ToolRequestInvalid(ToolPermanent):
    """The backend refused the request as invalid (HTTP 400/422): the arguments or the adapter."""

    category = "bad_request"


class ToolApiChanged(ToolPermanent):
    """The backend answered in a shape the tool's adapter does not read (its API changed)."""

    category = "api_changed"


class ToolInvalidArguments(InvalidInput, LedgerError):
    """The model's arguments do not fit the tool's schema; the message says where."""

    code = "invalid_arguments"
