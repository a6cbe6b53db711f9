"""Typed parameters of operator actions: one pydantic schema per action, read by every surface.

The API validates a request's ``params`` with it (and OpenAPI shows it); the console dialog
renders its fields and parses the posted form with it. A field's ``json_schema_extra`` says
how the dialog shows it: ``widget`` is ``number``, ``text``, ``json``, ``checkpoint`` (a
snapshot picker), ``choice`` (a select of ``choices``), ``ticks`` (check boxes in the preview table), ``plan``
(one "key: instructions" line per step, parsed by ``plan_lines``) or ``hidden`` (API only);
``initial`` names the Run attribute that pre-fills it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ninja import Schema
from pydantic import ConfigDict
from pydantic import ValidationError as PydanticValidationError

from agentops.errors import InvalidInput


class ActionParams(Schema):
    """Base of action parameters: unknown names are refused, not ignored.

    Strict (``true`` is not 1) as API bodies are; the console's form, whose values are all
    text, is parsed leniently by ``params_from_form``.
    """

    model_config = ConfigDict(extra="forbid", strict=True)


class NoParams(ActionParams):
    """This action takes no parameters."""


@dataclass(frozen=True)
class ParamField:
    """One field of an action's dialog."""

    name: str
    label: str
    help: str
    widget: str
    initial: str = ""
    choices: tuple[str, ...] = ()


def params_validate(verb: str, schema: type[ActionParams], raw: Any,
                    lax: bool = False) -> dict[str, Any]:
    """Return the validated parameters (unset ones left out), or raise InvalidInput (422)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"params of {verb} must be a JSON object", field="params")
    try:
        parsed = schema.model_validate(raw, strict=False if lax else None)
    except PydanticValidationError as exc:
        errors = [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()]
        detail = "; ".join(f"{'.'.join(e['loc']) or 'params'}: {e['msg']}" for e in errors)
        raise InvalidInput(f"invalid params for {verb}: {detail}", errors=errors) from None
    return parsed.model_dump(exclude_unset=True)


def params_fields(schema: type[ActionParams]) -> list[ParamField]:
    """Return the dialog fields of ``schema`` in declaration order (hidden ones left out)."""
    out = []
    for name, info in schema.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        widget = str(extra.get("widget", "text"))
        if widget == "hidden":
            continue
        out.append(ParamField(name, info.title or name.replace("_", " ").capitalize(),
                              info.description or "", widget, str(extra.get("initial", "")),
                              tuple(extra.get("choices") or ())))
    return out


def params_from_form(verb: str, schema: type[ActionParams], data: Any) -> dict[str, Any]:
    """Parse a posted dialog (a QueryDict) into validated parameters; raise InvalidInput."""
    raw: dict[str, Any] = {}
    for f in params_fields(schema):
        if f.widget == "ticks":
            raw[f.name] = data.getlist(f.name)
            continue
        if f.widget == "choice":
            # Another control of the dialog may share the name (the "then open the next
            # stuck run" box posts then=next): take the value that is one of the choices.
            picked = [v for v in data.getlist(f.name) if v in f.choices]
            if picked:
                raw[f.name] = picked[0]
            elif any(v not in ("", "next") for v in data.getlist(f.name)):
                raw[f.name] = data.getlist(f.name)[0]  # refused by validation, naming it
            continue
        text = (data.get(f.name) or "").strip()
        if not text:
            continue
        if f.widget == "plan":
            raw[f.name] = plan_lines(text)
        elif f.widget == "json":
            try:
                raw[f.name] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{f.label} must be JSON: {exc.msg} (line {exc.lineno})",
                                   field=f.name) from None
        else:
            raw[f.name] = text
    return params_validate(verb, schema, raw, lax=True)  # form values are text


def plan_lines(text: str) -> list[dict[str, Any]]:
    """Parse a plan typed as one "key: instructions" line per step (instructions optional)."""
    steps = []
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not key.strip():
            continue
        steps.append({"key": key.strip(), **({"instructions": rest.strip()} if sep else {})})
    return steps
