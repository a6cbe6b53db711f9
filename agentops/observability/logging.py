"""Structured logs: every record carries the run context (run_id, step, turn, tool_call_id,
attempt, and with tracing on the trace_id and span_id of its OpenTelemetry span) set by
``run_log_context``, rendered as JSON lines or as plain text.

The context lives in a ContextVar, so it follows the code through calls and asyncio tasks.
Threads do not inherit it: run thread work with ``contextvars.copy_context().run(fn)``.
"""
from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

from agentops.redaction import known_secrets

RUN_FIELDS = ("run_id", "step", "turn", "tool_call_id", "attempt", "trace_id", "span_id")
_KNOWN = frozenset(RUN_FIELDS)

_context: ContextVar[dict[str, Any] | None] = ContextVar("agentops_run_log_context", default=None)


def run_log_context(**fields: Any) -> _RunLogContext:
    """Stamp ``fields`` on every log record inside the block (nested blocks add to the outer)."""
    return _RunLogContext(fields)


class _RunLogContext:
    """``run_log_context``'s block: a class, not a generator context manager, which costs
    about four times the instructions to enter and leave (it is entered around every unit)."""

    __slots__ = ("fields", "token")

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def __enter__(self) -> None:
        fields = self.fields
        if not _KNOWN.issuperset(fields):  # no sets built
            unknown = set(fields) - _KNOWN
            raise TypeError(f"run_log_context takes {', '.join(RUN_FIELDS)}; "
                            f"got {sorted(unknown)}")
        values = {k: (str(v) if k == "run_id" else v) for k, v in fields.items() if v is not None}
        self.token = _context.set({**(_context.get() or {}), **values})

    def __exit__(self, *exc: object) -> None:
        _context.reset(self.token)


def run_log_stamp(**fields: Any) -> None:
    """Add ``fields`` to the current run context until the enclosing ``run_log_context`` ends.

    For a value learnt inside a block (a tick's trace id once its session is open): the outer
    block's reset drops it with the rest.
    """
    unknown = set(fields) - set(RUN_FIELDS)
    if unknown:
        raise TypeError(f"run_log_stamp takes {', '.join(RUN_FIELDS)}; got {sorted(unknown)}")
    _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})


def run_log_fields() -> dict[str, Any]:
    """Return the current run context (every field, None where unset)."""
    current = _context.get() or {}
    return {name: current.get(name) for name in RUN_FIELDS}


class RunContextFilter(logging.Filter):
    """Add the run context fields to each record; values passed in ``extra=`` win."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in run_log_fields().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def _scrubbed(line: str) -> str:
    """Return a formatted log line with every secret this process knows replaced."""
    return known_secrets().scrub_text(line)


class JsonFormatter(_BaseJsonFormatter):
    """One JSON object per line: time, level, logger, message, the run fields, any extras.

    The finished line (message, extras and traceback) is scrubbed of known secrets.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Format the record as JSON, then scrub it."""
        return _scrubbed(super().format(record))

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", True)
        super().__init__("{levelname}{name}{message}", style="{", **kwargs)

    def add_fields(self, log_data: dict, record: logging.LogRecord, message_dict: dict) -> None:
        """Add the standard fields, then every run field (null when unknown)."""
        super().add_fields(log_data, record, message_dict)
        for name in RUN_FIELDS:
            log_data.setdefault(name, getattr(record, name, None))


class PlainFormatter(logging.Formatter):
    """Human-readable lines that end with the run fields that are set (``run_id=… step=…``).

    The finished line (message and traceback) is scrubbed of known secrets.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Format the record, then append the run fields that are set."""
        line = super().format(record)
        values = ((name, getattr(record, name, None)) for name in RUN_FIELDS)
        ids = [f"{name}={value}" for name, value in values if value is not None]
        return _scrubbed(f"{line} [{' '.join(ids)}]" if ids else line)


class ClientErrorFilter(logging.Filter):
    """Keep a 4xx request log to its one line: drop the traceback Django attaches to a 403.

    ``django.request`` logs a PermissionDenied (403) with the exception's traceback; that is a
    routine refusal, not a fault. Tracebacks stay for 5xx and for records without a status.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


def logging_config(*, json: bool, level: str = "WARNING") -> dict[str, Any]:
    """Return a LOGGING dict: one stderr handler, JSON or plain, stamping the run context.

    Every record reaches exactly one handler, the root's: Django's own ``django`` logger
    handlers (a DEBUG-only console and mail_admins) are removed so that a request error is not
    printed twice, and a 4xx request error is one line without a traceback.
    """
    formatter = "agentops.observability.logging.JsonFormatter" if json else (
        "agentops.observability.logging.PlainFormatter"
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "run_context": {"()": "agentops.observability.logging.RunContextFilter"},
            "client_errors": {"()": "agentops.observability.logging.ClientErrorFilter"},
        },
        "formatters": {"default": {"()": formatter}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["run_context", "client_errors"],
            }
        },
        "loggers": {"django": {"handlers": [], "level": level, "propagate": True}},
        "root": {"handlers": ["console"], "level": level},
    }
