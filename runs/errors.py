"""Errors of the runs app: typed, with fields, mapped to HTTP by agentops.api."""
from __future__ import annotations

from agentops.errors import AgentOpsError, Conflict, InvalidInput, NotFound


class RunError(AgentOpsError):
    """Base of run errors."""


class RunNotFound(NotFound, RunError):
    """No run with that id."""

    code = "run_not_found"


class IllegalTransition(Conflict, RunError):
    """A status change the transition table does not allow; nothing was changed."""

    code = "illegal_transition"

    def __init__(self, kind: str, src: str, dst: str) -> None:
        super().__init__(f"a {kind} cannot move from {src} to {dst}", src=src, dst=dst)
        self.src, self.dst = src, dst



class UnknownSchemaVersion(RunError):
    """A snapshot or event was written by a schema this code has no migrator for."""

    code = "unknown_schema_version"


class UnknownAgent(InvalidInput, RunError):
    """No agent is registered under that name (or version)."""

    code = "unknown_agent"



class IdempotencyConflict(Conflict, RunError):
    """The Idempotency-Key was used before for a different request."""

    code = "idempotency_conflict"


class UnknownEventType(InvalidInput, RunError):
    """An event type that runs.event_types does not declare; nothing was written."""

    code = "unknown_event_type"


class InvalidListQuery(InvalidInput, RunError):
    """A run-list query string holds a filter that does not exist or a value it cannot take."""

    code = "invalid_list_query"


class EventNotFound(NotFound, RunError):
    """The run has no event at that seq."""

    code = "event_not_found"


class SavedViewNotFound(NotFound, RunError):
    """No saved view with that id belongs to this user."""

    code = "saved_view_not_found"


class SavedViewNameTaken(Conflict, RunError):
    """The user already has a saved view with that name; nothing was saved."""

    code = "saved_view_name_taken"
