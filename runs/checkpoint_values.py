"""The values of a signed checkpoint: each must be storable as this installation stores it.

A signature proves who exported a checkpoint, not that every value fits here: a hand-edited
file re-signed with the installation's own key, or one exported by a newer version, may hold
a NUL byte in a string (PostgreSQL's text and jsonb refuse it), an integer out of its
column's range, or a value of the wrong type. Each is refused before anything is written,
with a message naming the file and the field (``state.json: plan[0].title``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from runs.checkpoint_trust import CheckpointRejected
from runs.models import Run, Step

# JSON numbers outside a 64-bit integer cannot be compared or summed where the engine keeps
# its counters; no value the engine writes is that large.
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1
# Run columns written from the state's usage counters (runs.engine.runtime.session).
_USAGE = {"tokens": "tokens_used", "model_calls": "model_calls", "tool_calls": "tool_calls",
          "cost_micros": "cost_micros"}


def checkpoint_values_check(meta: dict[str, Any], state: dict[str, Any],
                            budget_fields: Iterable[str]) -> None:
    """Raise CheckpointRejected naming the first value import could not store as it is."""
    _walk("meta.json", meta, "")
    _walk("state.json", state, "")
    budget = meta["budget"]
    for name in budget_fields:
        if budget.get(name) is not None:
            _column("meta.json", f"budget.{name}", budget[name], Run, name)
    _state_check(state)


def _walk(file: str, value: Any, path: str) -> None:
    """Refuse NUL bytes in strings and keys, integers past 64 bits, NaN and infinities."""
    if isinstance(value, str):
        if "\x00" in value:
            _refuse(file, path, "holds a NUL byte (\\u0000), which cannot be stored")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            _refuse(file, path, f"is {_short(value)}, outside the 64-bit integer range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            _refuse(file, path, f"is {value}, not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_key(key)}" if path else _key(key)
            if "\x00" in key:
                _refuse(file, where, "is a key holding a NUL byte (\\u0000)")
            _walk(file, item, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(file, item, f"{path}[{i}]")


def _state_check(state: dict[str, Any]) -> None:
    info = state["run"]
    _kind("run.goal", info.get("goal"), str)
    _kind("run.input", info.get("input", {}), dict)
    _kind("run.constraints", info.get("constraints", []), list)
    for name in ("seq", "turn", "plan_version"):
        _kind(name, state.get(name), int)
    _column("state.json", "recoveries", state.get("recoveries"), Run, "recoveries")
    _column("state.json", "current_step", state.get("current_step") or "", Run, "current_step")
    _kind("usage", state.get("usage"), dict)
    for key, column in _USAGE.items():
        _column("state.json", f"usage.{key}", state["usage"].get(key), Run, column)
    for name in ("steps", "open_calls", "facts"):
        _kind(name, state.get(name), dict)
    for name in ("plan", "turns"):
        _kind(name, state.get(name), list)
    for key, step in state["steps"].items():
        _kind(f"steps.{key}", step, dict)
        _kind(f"steps.{key}.status", step.get("status"), str)
    for i, step in enumerate(state["plan"]):
        _plan_step(f"plan[{i}]", step)
    for call_id, call in state["open_calls"].items():
        _kind(f"open_calls.{call_id}", call, dict)
        _kind(f"open_calls.{call_id}.name", call.get("name"), str)


def _plan_step(where: str, step: Any) -> None:
    _kind(where, step, dict)
    _column("state.json", f"{where}.key", step.get("key"), Step, "key")
    _column("state.json", f"{where}.title", step.get("title"), Step, "title")
    _kind(f"{where}.input", step.get("input"), dict)
    _kind(f"{where}.depends_on", step.get("depends_on"), list)
    for j, dep in enumerate(step["depends_on"]):
        _kind(f"{where}.depends_on[{j}]", dep, str)


def _column(file: str, path: str, value: Any, model: type[models.Model], name: str) -> None:
    """Refuse ``value`` unless it fits column ``name`` of ``model`` (type, range, length)."""
    field = model._meta.get_field(name)
    if isinstance(field, models.IntegerField):
        if not isinstance(value, int) or isinstance(value, bool):
            _refuse(file, path, f"is {_type(value)}, not an integer")
        # The portable ranges (PostgreSQL's), not this connection's: SQLite stores 64 bits
        # in any integer column, and a run imported here may be exported to PostgreSQL.
        low, high = BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]
        if not low <= value <= high:
            _refuse(file, path, f"is {_short(value)}, outside {low}..{high}")
    elif isinstance(value, str):
        if field.max_length and len(value) > field.max_length:
            _refuse(file, path, f"is {len(value)} characters long, over {field.max_length}")
    else:
        _refuse(file, path, f"is {_type(value)}, not a string")


def _key(key: str) -> str:
    """Return ``key`` printable on one line (JSON escapes, at most 60 characters)."""
    text = json.dumps(key, ensure_ascii=False)[1:-1]
    return text if len(text) <= 60 else text[:59] + "…"


def _kind(path: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _refuse("state.json", path, f"is {_type(value)}, not {_TYPE_NAMES[kind]}")


_TYPE_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "an array"}


def _type(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             dict: "an object", list: "an array", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:10]}…({len(text)} digits)"


def _refuse(file: str, path: str, problem: str) -> None:
    raise CheckpointRejected(f"{file}: {path or 'the document'} {problem}; nothing was imported",
                             field=f"{file}:{path}")
