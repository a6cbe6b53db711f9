"""Tool argument schemas from type hints and docstrings, and strict validation against them.

A tool's keyword arguments become a pydantic model (``extra="forbid"``): ``list[str]`` is an
array of strings, ``Literal``/``Enum`` an enum, a ``BaseModel``/``TypedDict``/dataclass a
nested object, ``X | None`` with a default an optional argument, and each argument's line in
the docstring's ``Args:`` section its description. The JSON schema the model sees is derived
from that model, with ``additionalProperties: false`` on every object and no ``$ref`` left.
"""
from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic import ConfigDict, Field

from agentops.jsonstate import json_encoder
from ledger.errors import ToolInvalidArguments

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^(?P<indent>\s+)(?P<name>\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")
_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]+:\s*$")
_MAX_ERRORS = 5
_JSON = json_encoder()  # as json.dumps; made once (every call's arguments go through it)


def docstring_summary(fn: Callable[..., Any]) -> str:
    """Return the docstring up to its first section (the tool's description)."""
    doc = inspect.getdoc(fn) or ""
    lines = []
    for line in doc.splitlines():
        if _SECTION.match(line):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def docstring_args(fn: Callable[..., Any]) -> dict[str, str]:
    """Return each argument's description from the docstring's Google-style ``Args:`` section."""
    found: dict[str, str] = {}
    inside, indent, current = False, None, None
    for line in (inspect.getdoc(fn) or "").splitlines():
        if _ARGS_HEADER.match(line):
            inside, indent, current = True, None, None
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            break  # the next section (or prose) ends Args:
        m = _ARG_LINE.match(line)
        if m and (indent is None or len(m["indent"]) == indent):
            indent = len(m["indent"])
            current = m["name"].lstrip("*")
            found[current] = m["text"].strip()
        elif current and line.strip():
            found[current] = f"{found[current]} {line.strip()}".strip()
    return found


def args_model(fn: Callable[..., Any], *, name: str) -> type[pydantic.BaseModel]:
    """Return a pydantic model of ``fn``'s arguments after ``ctx`` (forbidding extra keys)."""
    described = docstring_args(fn)
    fields: dict[str, Any] = {}
    for p in list(inspect.signature(fn).parameters.values())[1:]:  # the first is ctx
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = _annotation(fn, p, name)
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (ann, Field(default, description=described.get(p.name)))
    title = "".join(part.title() for part in re.split(r"\W+", name)) + "Args"
    return pydantic.create_model(title, __config__=ConfigDict(extra="forbid"), **fields)


def _annotation(fn: Callable[..., Any], p: inspect.Parameter, tool: str) -> Any:
    """Return the evaluated type hint of one argument (``str`` when it has none)."""
    if p.annotation is p.empty:
        return str
    if not isinstance(p.annotation, str):
        return p.annotation
    try:
        # Evaluated one by one: the ctx annotation may name a type only imported for checking.
        return eval(p.annotation, getattr(fn, "__globals__", {}))  # the author's own type hint
    except NameError as exc:
        raise ValueError(f"tool {tool}: cannot resolve the type of argument {p.name!r}: {exc}") from None


def json_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """Return the model's JSON schema with refs inlined, titles dropped, every object closed."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    return _tidy(raw, defs, ())


def tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a JSON schema written elsewhere (an MCP server's) with refs inlined, objects closed."""
    rest = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _tidy(rest, defs, ())


def _tidy(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """Inline ``$ref``s, drop ``title``s and close every object schema."""
    if isinstance(node, list):
        return [_tidy(n, defs, seen) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.rsplit("/", 1)[1]
        if key in seen:
            raise ValueError(f"recursive argument type {key} is not supported in tool schemas")
        merged = {**defs[key], **{k: v for k, v in node.items() if k != "$ref"}}
        return _tidy(merged, defs, (*seen, key))
    out = {k: _tidy(v, defs, seen) for k, v in node.items() if k != "title"}
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` in the providers' strict form: every property required, optional ones nullable.

    OpenAI's ``strict: true`` function calling needs every property listed in ``required``;
    an argument that may be left out is declared nullable instead, and ``null`` is read back as
    "not given" (``drop_unset_nulls``).
    """
    if not isinstance(schema, dict):
        return schema
    # Strict mode refuses keywords it cannot enforce; a default is meaningless when all are sent.
    out = {k: v for k, v in schema.items() if k != "default"}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = strict_schema(out[key])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [strict_schema(s) for s in out[key]]
    props = out.get("properties")
    if isinstance(props, dict):
        required = set(out.get("required") or ())
        out["properties"] = {
            k: strict_schema(v) if k in required else _nullable(strict_schema(v))
            for k, v in props.items()
        }
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` also accepting null (unchanged when it already does)."""
    if _accepts_null(schema):
        return schema
    rest = {k: v for k, v in schema.items() if k not in ("default", "description")}
    extra = {k: schema[k] for k in ("description",) if k in schema}
    return {"anyOf": [rest, {"type": "null"}], **extra}


def _accepts_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(s) for s in schema.get("anyOf") or () if isinstance(s, dict))


def drop_unset_nulls(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Return ``args`` without nulls for optional arguments that do not accept null.

    A model speaking the strict form sends ``null`` for an argument it leaves out.
    """
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return {k: v for k, v in args.items()
            if not (v is None and k in props and k not in required
                    and not _accepts_null(props[k]))}


def validate_args(model: type[pydantic.BaseModel], args: dict[str, Any], *,
                  tool: str) -> pydantic.BaseModel:
    """Return ``args`` parsed strictly into ``model``, or raise ToolInvalidArguments saying where.

    Parsing goes through JSON (what the model sent is JSON), so enums and dates come from
    their JSON forms while ``"3"`` is still not an integer.
    """
    try:
        return model.model_validate_json(_JSON(args), strict=True)
    except pydantic.ValidationError as exc:
        raise invalid(tool, [_problem(e) for e in exc.errors(include_url=False)]) from None


def schema_problems(validator: Any, args: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (path, message) for everything in ``args`` the JSON schema refuses."""
    out: list[tuple[str, str]] = []
    for err in sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path))):
        out += _schema_problem(err)
    return out


def _schema_problem(err: Any) -> list[tuple[str, str]]:
    """Return the problems one jsonschema error stands for, at the deepest useful path."""
    if err.validator in ("anyOf", "oneOf") and err.context:
        # "X | None": say what is wrong with the X branch, not "not valid under any schema".
        useful = [e for e in err.context if e.schema != {"type": "null"}] or err.context
        return _schema_problem(max(useful, key=lambda e: len(e.absolute_path)))
    base = "/".join(str(p) for p in err.absolute_path)
    if err.validator == "required":
        return [(_join(base, k), "is required") for k in err.validator_value
                if k not in err.instance]
    if err.validator == "additionalProperties" and err.validator_value is False:
        known = err.schema.get("properties") or {}
        return [(_join(base, k), "is not an argument of this tool")
                for k in err.instance if k not in known]
    return [(base or "(top level)", err.message)]


def _join(base: str, key: str) -> str:
    return f"{base}/{key}" if base else key


def invalid(tool: str, problems: list[tuple[str, str]]) -> ToolInvalidArguments:
    """Return the typed error listing what is wrong with a call's arguments, path by path."""
    shown = "; ".join(f"{path}: {msg}" for path, msg in problems[:_MAX_ERRORS])
    more = f" (and {len(problems) - _MAX_ERRORS} more)" if len(problems) > _MAX_ERRORS else ""
    return ToolInvalidArguments(
        f"invalid arguments for {tool}: {shown}{more}", tool=tool, path=problems[0][0],
        errors=[{"path": p, "message": m} for p, m in problems],
    )


def _problem(error: dict[str, Any]) -> tuple[str, str]:
    """Return (path, message) for one pydantic error, worded for a model to fix its call."""
    path = "/".join(str(p) for p in error.get("loc", ())) or "(top level)"
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return path, "is not an argument of this tool"
    if kind == "missing":
        return path, "is required"
    given = error.get("input")
    shown = json.dumps(given)[:80] if given is not None else "null"
    return path, f"{error.get('msg', 'invalid')} (got {shown})"


def typed_call(fn: Callable[..., Any], model: type[pydantic.BaseModel],
               leading: int = 1) -> Callable[..., Any]:
    """Return ``fn`` taking JSON arguments and receiving them as typed values (enums, models)."""
    names = list(model.model_fields)

    def call(*head: Any, **args: Any) -> Any:
        if len(head) != leading:
            return fn(*head, **args)
        fields = model.model_validate_json(_JSON(args)).__dict__  # a model keeps its fields here
        values = {n: fields[n] for n in names if n in args}
        return fn(*head, **values)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.__name__ = getattr(fn, "__name__", "tool")
    return call
