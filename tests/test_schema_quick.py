"""agentops.schema_quick: its quick yes is jsonschema's yes, and it steps aside otherwise."""
from __future__ import annotations

import itertools

import jsonschema.validators
import pytest

from agentops.llm.repair import _schema_errors
from agentops.schema_quick import quick_check
from agentops.tools import tool
from ledger.errors import ToolInvalidArguments

FLAT = {"type": "object", "properties": {"i": {"type": "integer", "description": "n"},
                                         "x": {"type": "number"}, "s": {"type": "string"},
                                         "b": {"type": "boolean"},
                                         "o": {"type": ["string", "null"]},
                                         "u": {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                               "default": None}},
        "required": ["i"], "additionalProperties": False}
VALUES = [0, 3, -1, 2.0, 2.5, float("nan"), float("inf"), True, False, None, "3", "", [], {}]


def _jsonschema_ok(schema: dict, args: object) -> bool:
    return not list(jsonschema.validators.validator_for(schema)(schema).iter_errors(args))


@pytest.mark.parametrize("closed", [True, False])
def test_quick_yes_and_no_match_jsonschema_on_flat_schemas(closed: bool) -> None:
    schema = {**FLAT, "additionalProperties": not closed}
    check = quick_check(schema)
    assert check is not None
    cases = [{}, {"i": 1, "extra": 1}, ["i"], "i", None]
    for name in ("i", "x", "s", "b", "o", "u"):
        cases += [{"i": 1, name: v} for v in VALUES]
    cases += [{"i": a, "x": b} for a, b in itertools.product(VALUES, VALUES)]
    for args in cases:
        assert check(args) == _jsonschema_ok(schema, args), args


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"i": {"type": "integer", "minimum": 0}}},
    {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"e": {"enum": ["a", "b"]}}},
    {"type": "object", "properties": {"n": {"anyOf": [{"type": "string"}, {"maxLength": 3}]}}},
    {"type": "object", "properties": {"n": {"anyOf": [{"anyOf": [{"type": "null"}]}]}}},
    {"type": "object", "properties": {"n": {"anyOf": []}}},
    {"type": "object", "properties": {"o": {"type": "object"}}},
    {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object", "properties": {}},
    {"type": "object", "$defs": {}, "properties": {}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "array"},
    {"type": "object", "properties": {"t": {"type": "decimal"}}},
])
def test_schemas_it_cannot_check_are_left_to_jsonschema(schema: dict) -> None:
    assert quick_check(schema) is None


def test_the_check_is_cached_per_schema_object() -> None:
    schema = {"type": "object", "properties": {"i": {"type": "integer"}}}
    assert quick_check(schema) is quick_check(schema)
    same_shape = {"type": "object", "properties": {"i": {"type": "string"}}}
    assert quick_check(same_shape)({"i": "x"}) and not quick_check(schema)({"i": "x"})


@tool(effect="read")
def _count(ctx, n: int, label: str | None = None) -> None:
    """Count."""


def test_a_tool_still_says_what_is_wrong() -> None:
    assert quick_check(_count.parameters) is not None
    assert _count.validate({"n": 2}) == {"n": 2}
    with pytest.raises(ToolInvalidArguments) as caught:
        _count.validate({"n": "2", "other": 1})
    assert "n: " in str(caught.value) and "other: is not an argument" in str(caught.value)


def test_the_repair_check_still_says_what_is_wrong() -> None:
    assert _schema_errors("t", FLAT, {"i": 1, "o": None}) == []
    assert _schema_errors("t", FLAT, {"i": True}) == ["t i: True is not of type 'integer'"]
