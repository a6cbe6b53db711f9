"""StrictIn: the base of every request body the API reads.

Two holes of lax validation are closed: pydantic's lax mode reads ``true`` as 1 and ``"5"``
as 5, and ninja's Schema reads any non-object (an array, a number, a string) as an object
whose fields are all missing, so a body of ``[]`` passed as ``{}`` on endpoints whose fields
are optional. Here numbers must be numbers, booleans booleans, text text, and objects objects.
Fields whose JSON form is text (UUIDs, datetimes) opt out with ``Field(strict=False)``.

``Instant``: a time read from a request (body or query) that exists in UTC. Python reads
``0001-01-01T00:00:00+01:00`` (a year 0 in UTC), which no database column can hold: refused
with a message instead of failing when the query is built.
"""
from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from django.utils import timezone
from ninja import Schema
from pydantic import (AfterValidator, ConfigDict, ModelWrapValidatorHandler, ValidationInfo,
                      model_validator)
from pydantic_core import PydanticCustomError


class StrictIn(Schema):
    """A request body validated strictly (no coercion), that must be a JSON object."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(cls, values: Any, handler: ModelWrapValidatorHandler[Any],
                            info: ValidationInfo) -> Any:
        # Replaces ninja's: that one wraps any value in a DjangoGetter (for reading ORM
        # objects), which is how an array used to pass as an object with every field missing.
        if isinstance(values, Schema):
            return handler(values)
        if not isinstance(values, dict):
            raise PydanticCustomError("dict_type", "must be a JSON object, not {kind}",
                                      {"kind": _json_kind(values)})
        return handler(values)


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _in_utc(value: dt.datetime) -> dt.datetime:
    """Return ``value`` when it has a UTC time (a naive one is read in the default zone)."""
    try:
        aware = value if value.tzinfo else timezone.make_aware(value)
        aware.astimezone(dt.timezone.utc)
    except (OverflowError, ValueError):
        raise PydanticCustomError(
            "datetime_range", "must lie between 0001-01-01 and 9999-12-31 in UTC") from None
    return value


Instant = Annotated[dt.datetime, AfterValidator(_in_utc)]
