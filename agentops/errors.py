"""The base of every AgentOps error, and the HTTP status each family maps to.

Apps subclass these (runs.errors, ledger.errors, approvals.errors); agentops.api maps the
bases to responses in one place.
"""
from __future__ import annotations

from typing import Any


class AgentOpsError(Exception):
    """Base of every domain error; carries a stable code, a message and details."""

    code = "error"
    http_status = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(AgentOpsError):
    """The thing asked for does not exist (or the caller may not know it does)."""

    code = "not_found"
    http_status = 404


class Conflict(AgentOpsError):
    """The request conflicts with the current state (a state change, a duplicate)."""

    code = "conflict"
    http_status = 409


class InvalidInput(AgentOpsError):
    """The input is well-formed but not acceptable; the message says what was wrong."""

    code = "invalid"
    http_status = 422


class ConfigError(AgentOpsError):
    """A setting or a registration is wrong; the message says which and how to fix it."""

    code = "config"
    http_status = 500
