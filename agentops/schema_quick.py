"""A quick "these arguments fit" for flat object schemas, before jsonschema's full check.

Every model step checks the tool call's arguments against the tool's JSON schema twice (the
reply's check in agentops.llm.repair, then ``ToolSpec.validate``); jsonschema builds a
validator for the schema and one more for every property it descends into, ~30-60 us a
check, for what is most often an object of a few scalar arguments. ``quick_check(schema)``
compiles such a schema once into a plain function that says True only when jsonschema would
find nothing wrong; on False (something is wrong, or may be), the caller runs jsonschema,
which says what.

A schema is quick-checked only when it is an object schema (no ``$schema``, ``$ref`` or any
keyword besides those below) whose properties are each ``{"type": T}`` for JSON scalar types
(or a list of them, or an ``anyOf`` of such: ``X | None``), with ``required`` and a boolean ``additionalProperties``; annotation
keywords (description, title, default, examples) are ignored as jsonschema ignores them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ANNOTATIONS = frozenset({"description", "title", "default", "examples"})
_TOP = frozenset({"type", "properties", "required", "additionalProperties"}) | _ANNOTATIONS
_PROPERTY = frozenset({"type"}) | _ANNOTATIONS
_ANY_OF = frozenset({"anyOf"}) | _ANNOTATIONS
_CACHE_MAX = 256
_cache: dict[int, tuple[dict[str, Any], Callable[[Any], bool] | None]] = {}


def _is_integer(v: Any) -> bool:
    return (type(v) is int) or (type(v) is float and v.is_integer())


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


# jsonschema's types: booleans are not numbers; 1.0 is an integer (draft 4 and later).
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def quick_check(schema: Any) -> Callable[[Any], bool] | None:
    """Return the quick check of ``schema`` (cached while the same dict is passed), or None
    when the schema is not one it can check."""
    cached = _cache.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    check = _compiled(schema)
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[id(schema)] = (schema, check)
    return check


def _compiled(schema: Any) -> Callable[[Any], bool] | None:
    if not isinstance(schema, dict) or not _TOP.issuperset(schema) or schema.get("type") != "object":
        return None
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(closed, bool):
        return None
    tests = {name: _property_test(sub) for name, sub in properties.items()}
    if None in tests.values() or not all(isinstance(k, str) for k in required):
        return None
    must = frozenset(required)

    def check(args: Any) -> bool:
        if type(args) is not dict or not must.issubset(args):
            return False
        for key, value in args.items():
            test = tests.get(key)
            if test is None:
                if closed is False:
                    return False
            elif not test(value):
                return False
        return True
    return check


def _property_test(sub: Any) -> Callable[[Any], bool] | None:
    """Return the test of one property's value, or None when it is not a plain scalar type
    (``{"type": T}``, ``{"type": [T, ...]}``, or an ``anyOf`` of those: ``X | None``)."""
    if isinstance(sub, dict) and "anyOf" in sub and _ANY_OF.issuperset(sub):
        branches = sub["anyOf"] if isinstance(sub["anyOf"], list) else []
        tests = [_property_test(b) if "anyOf" not in b else None
                 for b in branches if isinstance(b, dict)]
        if not tests or len(tests) != len(branches) or None in tests:
            return None
        return lambda v: any(t(v) for t in tests)
    if not isinstance(sub, dict) or not _PROPERTY.issuperset(sub) or "type" not in sub:
        return None
    kinds = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
    if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
        return None
    tests = [_TYPES[k] for k in kinds]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(t(v) for t in tests)
