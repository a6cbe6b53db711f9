"""Tool schemas from type hints and docstrings, validated strictly, through the engine."""
from __future__ import annotations

import enum
from typing import Literal

import pytest
from pydantic import BaseModel

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolInvalidArguments
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive

SEEN: list[dict] = []


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    city: str
    zip: str | None = None


@tool(effect="write", idempotent=True)
def ship(ctx, items: list[str], to: Address, speed: Literal["standard", "express"],
         priority: Priority = Priority.LOW, note: str | None = None,
         quantities: dict[str, int] | None = None) -> ToolResult:
    """Ship items to an address.

    Args:
        items: SKUs to put in the parcel.
        to: where the parcel goes.
        speed: the carrier service; express costs more
            and arrives next day.
        priority: how soon the warehouse picks it.
        note: printed on the label.
        quantities: how many of each SKU (default one each).
    """
    SEEN.append({"items": items, "to": to, "speed": speed, "priority": priority, "note": note})
    return ToolResult(facts={"parcel": f"p-{len(items)}", "city": to.city})


def test_schema_covers_lists_enums_nested_models_optionals_and_descriptions():
    schema = ship.parameters
    props = schema["properties"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["items", "to", "speed"]
    assert props["items"] == {"type": "array", "items": {"type": "string"},
                              "description": "SKUs to put in the parcel."}
    assert props["speed"]["enum"] == ["standard", "express"]
    assert props["speed"]["description"] == (
        "the carrier service; express costs more and arrives next day.")
    assert props["priority"]["enum"] == ["low", "high"] and props["priority"]["default"] == "low"
    nested = props["to"]
    assert nested["type"] == "object" and nested["additionalProperties"] is False
    assert nested["required"] == ["street", "city"] and "$ref" not in str(schema)
    assert {"type": "null"} in props["note"]["anyOf"]
    assert props["quantities"]["anyOf"][0]["additionalProperties"] == {"type": "integer"}
    assert ship.description == "Ship items to an address."


def test_strict_form_requires_every_property_and_makes_optionals_nullable():
    fn = ship.schema(strict=True)["function"]
    params = fn["parameters"]
    assert fn["strict"] is True
    assert params["required"] == list(params["properties"])
    assert params["properties"]["priority"]["anyOf"][1] == {"type": "null"}
    assert params["properties"]["to"]["required"] == ["street", "city", "zip"]
    # null for an optional argument left out is read as "not given"
    args = {"items": ["a"], "to": {"street": "s", "city": "c", "zip": None}, "speed": "express",
            "priority": None, "note": None, "quantities": None}
    assert "priority" not in ship.validate(args)


@pytest.mark.parametrize(("args", "where"), [
    ({"items": "a", "to": {"street": "s", "city": "c"}, "speed": "express"}, "items:"),
    ({"items": ["a"], "to": {"street": "s"}, "speed": "express"}, "to/city: is required"),
    ({"items": ["a"], "to": {"street": "s", "city": "c", "floor": 3}, "speed": "express"},
     "to/floor: is not an argument"),
    ({"items": ["a"], "to": {"street": "s", "city": "c"}, "speed": "teleport"}, "speed:"),
    ({"items": [1], "to": {"street": "s", "city": "c"}, "speed": "express"}, "items/0:"),
    ({"items": ["a"], "to": {"street": "s", "city": "c"}, "speed": "express",
      "quantities": {"a": "2"}}, "quantities/a:"),
])
def test_bad_arguments_raise_a_typed_error_naming_the_path(args, where):
    with pytest.raises(ToolInvalidArguments) as caught:
        ship.validate(args)
    assert where in caught.value.message, caught.value.message
    assert caught.value.details["tool"] == "ship" and caught.value.details["errors"]


@pytest.mark.django_db
def test_the_engine_refuses_bad_calls_and_passes_typed_values(engine):
    SEEN.clear()
    good = {"items": ["sku-1", "sku-2"], "to": {"street": "1 Main St", "city": "Lyon"},
            "speed": "express", "priority": "high"}
    script = {"ship": [call("ship", items="sku-1", to={"street": "x"}, speed="fast"),
                       call("ship", **good), say("shipped")]}
    registry.register(Agent(name="typed-ship", version="1", system_prompt="Ship it.",
                            tools=[ship], plan=[StepSpec("ship")],
                            model=lambda: ScriptedModel(script)))
    run = run_start(agent="typed-ship", goal="ship two items")
    assert drive(run) == "succeeded"

    first, second = [c["result"] for t in load_state(run.pk)["turns"] for c in t["calls"]]
    assert first["error"]["category"] == "invalid_arguments"
    assert "to/city: is required" in first["error"]["message"]
    assert "speed:" in first["error"]["message"]
    assert second["status"] == "succeeded" and second["facts"]["city"] == "Lyon"
    # The function received typed values: the enum member and the nested model.
    assert len(SEEN) == 1
    assert SEEN[0]["priority"] is Priority.HIGH and isinstance(SEEN[0]["to"], Address)
    assert SEEN[0]["to"].city == "Lyon" and SEEN[0]["note"] is None
    assert ToolCall.objects.filter(run=run, tool="ship", status="succeeded").count() == 1
