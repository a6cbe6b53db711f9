"""The tool SDK: ``@tool`` declares what a tool does to the world; the ledger does the rest.

A tool is a plain function taking ``ctx: ToolContext`` first and keyword arguments after,
returning a ToolResult (or a dict of facts). Its declaration tells the engine whether it is
safe to repeat (``idempotent``), how to ask the world whether it ran (``probe``), how to undo
it (``compensate``) and whether a person must approve it.
"""
from __future__ import annotations

import datetime
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from ledger.errors import ToolInvalidArguments

Effect = Literal["read", "write"]
Reversibility = Literal["reversible", "manual", "irreversible"]
ApprovalMode = Literal["never", "always", "policy"]
_PY_TO_JSON = {str: "string", int: "integer", float: "number", bool: "boolean",
               dict: "object", list: "array"}


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: facts (stable, machine-readable), a summary for the model, a log.

    ``next_cursor`` marks a paged result; ``missing_fields`` names what a partial result lacks.
    ``log`` is text, bytes, or, for big output, a ``pathlib.Path`` or a binary file object:
    those are streamed to the artifact store and never read into memory (a file object is
    closed once stored; a path is left in place). See ledger.services.paging.
    """

    facts: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    log: Any = ""
    missing_fields: tuple[str, ...] = ()
    next_cursor: str | None = None


class CancelToken:
    """Set when the run is cancelled while the tool runs; long tools should check it."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Mark the call cancelled."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Return True once the run was cancelled."""
        return self._event.is_set()


class WaitRequest(BaseException):  # noqa: N818 - control flow, like RunControl
    """Raised by a tool to park its call in a durable wait; the engine resolves the call later.

    A BaseException so a tool author's ``except Exception`` does not swallow it.
    """

    def __init__(self, timeout_s: float | None = None) -> None:
        super().__init__(timeout_s)
        self.timeout_s = timeout_s


class WaitForSignal(WaitRequest):
    """Finish this call with the payload of the next signal ``name`` sent to the run."""

    def __init__(self, name: str, timeout_s: float | None = None) -> None:
        super().__init__(timeout_s)
        self.name = name


class WaitForChildren(WaitRequest):
    """Start child runs (``[{agent, goal, input}]``) and finish this call when all have ended."""

    def __init__(self, children: list[dict[str, Any]], timeout_s: float | None = None) -> None:
        super().__init__(timeout_s)
        self.children = children


@dataclass
class ToolContext:
    """What a running tool knows about its call.

    ``fencing_token`` grows with every new lease holder of the run (it is the run's version
    when this worker proved it held the run, just before the call): a system that accepts a
    fencing token refuses a write carrying a smaller one than it has seen, so a worker that
    was paused and lost the run cannot write behind its successor. ``deadline`` is the
    attempt's hard deadline (start + timeout + lease TTL): the engine treats the attempt as
    possibly in flight until then, so a tool should pass it on to systems that accept a
    deadline and must not make its effect after it. Both are 0 / None for reads.
    """

    run_id: str
    step: str
    tool_call_id: str
    attempt: int
    idempotency_key: str
    cancel: CancelToken = field(default_factory=CancelToken)
    heartbeat: Callable[[], None] = lambda: None
    fencing_token: int = 0
    deadline: datetime.datetime | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool's declaration; see ``tool`` for the meaning of each field."""

    name: str
    fn: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
    effect: Effect = "read"
    idempotent: bool = False
    probe: Callable[..., Any] | None = None
    compensate: Callable[..., Any] | None = None
    reversibility: Reversibility = "reversible"
    approval: ApprovalMode = "never"
    approval_policy: Callable[[dict[str, Any]], str | None] | None = None
    approval_expiry_s: int = 3600
    approval_on_expiry: str = "deny"
    timeout: float | None = None
    retry: int = 3
    sensitive: tuple[str, ...] = ()
    concurrency: int | None = None
    rate: int | None = None
    pager: Callable[..., Any] | None = None

    @property
    def is_write(self) -> bool:
        """Return True when the tool changes the outside world."""
        return self.effect == "write"

    @property
    def safe_to_repeat(self) -> bool:
        """Return True when running the call again cannot double a side effect."""
        return not self.is_write or self.idempotent

    @property
    def effect_class(self) -> str:
        """Return read / idempotent / reversible / irreversible / manual for people."""
        if not self.is_write:
            return "read"
        if self.idempotent and self.reversibility == "reversible":
            return "idempotent"
        return self.reversibility

    def validate(self, args: Any) -> dict[str, Any]:
        """Return ``args`` if they fit the schema, else raise ToolInvalidArguments saying where."""
        if not isinstance(args, dict):
            raise ToolInvalidArguments(f"arguments for {self.name} must be a JSON object")
        error = jsonschema.exceptions.best_match(self._validator().iter_errors(args))
        if error is not None:
            exc = error
            where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            raise ToolInvalidArguments(
                f"invalid arguments for {self.name} at {where}: {exc.message}",
                tool=self.name,
                path=where,
            )
        return args

    def _validator(self) -> Any:
        # Building a validator checks the schema; do it once per tool, not once per call.
        cached = self.__dict__.get("_cached_validator")
        if cached is None:
            cls = jsonschema.validators.validator_for(self.parameters)
            cls.check_schema(self.parameters)
            cached = cls(self.parameters)
            object.__setattr__(self, "_cached_validator", cached)
        return cached

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI function schema of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    parameters: dict[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Declare a tool.

    Args:
        name: the name the model calls (defaults to the function name).
        parameters: a JSON schema for the arguments (derived from the signature if omitted).
        effect: "read" or "write". idempotent: True when the tool honours ``ctx.idempotency_key``.
        probe: ``probe(ctx, **args) -> ToolResult | None`` asks the world whether the call ran
            (None = it did not). compensate: ``compensate(ctx, facts, **args)`` undoes it.
        reversibility, approval ("never" | "always" | "policy" with ``approval_policy(args)``
            returning a reason when a person must approve), timeout (s), retry (attempts on
            transient errors), sensitive (argument names stored redacted), concurrency, rate
            (calls per minute), pager (``pager(ctx, cursor=..., **args)`` returns the page
            after ``cursor`` of a paged result; without it the tool is called with ``cursor=``).

    Raises:
        ValueError: when the declaration contradicts itself.
    """

    def wrap(f: Callable[..., Any]) -> ToolSpec:
        spec = ToolSpec(
            name=name or f.__name__,
            fn=f,
            description=(inspect.getdoc(f) or "").split("\n\n")[0],
            parameters=parameters or _schema_from_signature(f),
            **options,
        )
        if spec.effect not in ("read", "write"):
            raise ValueError(f"tool {spec.name}: effect must be 'read' or 'write'")
        if spec.approval == "policy" and spec.approval_policy is None:
            raise ValueError(f"tool {spec.name}: approval='policy' needs approval_policy=")
        try:
            spec._validator()
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"tool {spec.name}: its parameters schema is invalid: {exc.message}") from None
        return spec

    return wrap(fn) if fn is not None else wrap


def _schema_from_signature(fn: Callable[..., Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    params = list(inspect.signature(fn).parameters.values())[1:]  # first is ctx
    for p in params:
        ann = p.annotation if p.annotation is not inspect.Parameter.empty else str
        if isinstance(ann, str):
            ann = {"str": str, "int": int, "float": float, "bool": bool, "dict": dict,
                   "list": list}.get(ann.split("|")[0].strip(), str)
        props[p.name] = {"type": _PY_TO_JSON.get(ann, "string")}
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}
