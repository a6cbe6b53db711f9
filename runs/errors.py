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


class NotJSONSerializable(InvalidInput, RunError):
    """State or event data holds a value that is not JSON; ``path`` names where."""

    code = "not_json"

    def __init__(self, path: str, type_name: str) -> None:
        super().__init__(
            f"value at {path} is a {type_name}, which is not JSON "
            "(use str/int/float/bool/None/list/dict with string keys)",
            path=path,
            type=type_name,
        )
        self.path = path


class UnknownSchemaVersion(RunError):
    """A snapshot or event was written by a schema this code has no migrator for."""

    code = "unknown_schema_version"


class UnknownAgent(InvalidInput, RunError):
    """No agent is registered under that name (or version)."""

    code = "unknown_agent"


class RunControl(BaseException):  # noqa: N818 - control-flow signal, not an error
    """Base of control-flow signals that must pass through a tool author's ``except Exception``."""


class LeaseLost(RunControl):
    """Another worker (or an operator) changed the run: stop at once, write nothing more."""


class RunCancelled(RunControl):
    """The run was cancelled: stop starting work; record what arrives late."""


class IdempotencyConflict(Conflict, RunError):
    """The Idempotency-Key was used before for a different request."""

    code = "idempotency_conflict"


class UnknownEventType(InvalidInput, RunError):
    """An event type that runs.event_types does not declare; nothing was written."""

    code = "unknown_event_type"
