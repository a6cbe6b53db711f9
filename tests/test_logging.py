"""Structured logs: JSON lines carry the run context set by run_log_context."""
from __future__ import annotations

import io
import json
import logging
import logging.config
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import copy_context

import pytest

from agentops.observability.logging import logging_config, run_log_context


@contextmanager
def _captured(*, json_lines: bool) -> Iterator[io.StringIO]:
    """Configure the root logger from logging_config() into a buffer; restore it after."""
    config = logging_config(json=json_lines, level="INFO")
    buffer = io.StringIO()
    config["handlers"]["console"]["stream"] = buffer
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logging.config.dictConfig(config)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def log_lines():
    """Log as JSON into a buffer; return a function that parses the lines written so far."""
    with _captured(json_lines=True) as buffer:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_every_json_line_carries_the_run_ids(log_lines):
    run_id = uuid.uuid4()
    log = logging.getLogger("runs.engine.runtime.loop")
    with run_log_context(run_id=run_id, step="fetch"):
        log.info("step started")
        with run_log_context(turn=3, tool_call_id="tc_abc", attempt=2):
            log.warning("tool timed out after %ss", 30)
        log.info("step done")
    log.info("outside any run")

    started, timed_out, done, outside = log_lines()
    assert started["run_id"] == str(run_id) and started["step"] == "fetch"
    assert started["tool_call_id"] is None and started["attempt"] is None
    assert timed_out == {**timed_out, "run_id": str(run_id), "step": "fetch", "turn": 3,
                         "tool_call_id": "tc_abc", "attempt": 2, "level": "WARNING",
                         "logger": "runs.engine.runtime.loop", "message": "tool timed out after 30s"}
    assert "timestamp" in timed_out
    assert done["turn"] is None and done["tool_call_id"] is None  # inner block was left
    assert all(outside[k] is None for k in ("run_id", "step", "turn", "tool_call_id", "attempt"))


def test_extra_fields_win_and_third_party_loggers_are_stamped_too(log_lines):
    with run_log_context(run_id="r-1", attempt=1):
        logging.getLogger("django.db.backends").info("query")
        logging.getLogger("ledger").info("retry", extra={"attempt": 2, "tool": "charge"})
    query, retry = log_lines()
    assert query["run_id"] == "r-1" and query["logger"] == "django.db.backends"
    assert retry["attempt"] == 2 and retry["tool"] == "charge" and retry["run_id"] == "r-1"


def test_context_follows_copy_context_into_other_threads(log_lines):
    import threading

    with run_log_context(run_id="r-2", tool_call_id="tc_t"):
        ctx = copy_context()
    thread = threading.Thread(target=ctx.run, args=(logging.getLogger("t").info, "in thread"))
    thread.start()
    thread.join()
    (line,) = log_lines()
    assert line["run_id"] == "r-2" and line["tool_call_id"] == "tc_t"


def test_unknown_context_fields_are_refused():
    with pytest.raises(TypeError, match="run_id, step, turn, tool_call_id, attempt"):
        with run_log_context(user="x"):
            pass


def test_plain_format_appends_the_ids_that_are_set():
    with _captured(json_lines=False) as buffer, run_log_context(run_id="r-3", step="s1"):
        logging.getLogger("x").info("hello")
    assert buffer.getvalue().rstrip().endswith("INFO x hello [run_id=r-3 step=s1]")


def test_log_lines_are_scrubbed_of_secrets_the_process_handled(caplog):
    """A tool that logs its sensitive argument: both formatters write the marker instead."""
    from agentops.observability.logging import JsonFormatter, PlainFormatter
    from agentops.redaction import marker
    from ledger.sealed import seal

    seal({"password": "hunter2-Ünïcode-secret"})  # the worker seals what a run sends
    for formatter in (PlainFormatter(), JsonFormatter()):
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        handler.setFormatter(formatter)
        log = logging.getLogger("tests.scrub")
        log.addHandler(handler)
        try:
            log.warning("login with %s", "hunter2-Ünïcode-secret",
                        extra={"pw": "hunter2-Ünïcode-secret"})
            try:
                raise ValueError("bad password hunter2-Ünïcode-secret")
            except ValueError:
                log.exception("failed")
        finally:
            log.removeHandler(handler)
        text = out.getvalue()
        assert "hunter2" not in text and "\\u00dcn" not in text, text
        assert marker("hunter2-Ünïcode-secret") in text
