"""The tool SDK: ``@tool`` declares what a tool does to the world; the ledger does the rest.

A tool is a plain function taking ``ctx: ToolContext`` first and keyword arguments after,
returning a ToolResult (or a dict of facts). Its declaration tells the engine whether it is
safe to repeat (``idempotent``), how to ask the world whether it ran (``probe``), how to undo
it (``compensate``) and whether a person must approve it.
"""
from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from agentops import toolschema
from agentops.schema_quick import quick_check
from ledger.errors import ToolInvalidArguments
from ledger.statuses import effect_class_of, reversibility_of

Effect = Literal["read", "write"]
Reversibility = Literal["reversible", "manual", "irreversible"]
ApprovalMode = Literal["never", "always", "policy"]


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


@dataclass(frozen=True)
class FoundDifferent:
    """A probe's answer: an effect exists under the call's key, but not the one the call asked for.

    ``facts`` are what was found; ``summary`` says how it differs. The call is never taken as
    succeeded: it goes ``unknown`` and a person compares what was asked with what was found.
    """

    facts: dict[str, Any] = field(default_factory=dict)
    summary: str = ""


class CancelToken:
    """Set when the run is cancelled while the tool runs; long tools should check it.

    A flag, not a ``threading.Event``: nothing waits on it, a tool polls ``cancelled``, and
    an attribute store is atomic (the keeper thread sets it while the tool thread reads).
    Every tool call makes one: an Event costs a Condition and two locks each time.
    """

    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        """Mark the call cancelled."""
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        """Return True once the run was cancelled."""
        return self._cancelled


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
    """Start child runs (``[{agent, goal, input}]``) and finish this call when all have ended.

    Each child gets a share of what the parent may still spend (tokens, calls, cost; its
    deadline at most the parent's): ``split="equal"`` divides it evenly, ``"weights"`` by
    each child's ``weight`` (a positive number). A child cannot spend past its share; what
    it leaves unspent returns to the parent when the children have ended.
    """

    def __init__(self, children: list[dict[str, Any]], timeout_s: float | None = None, *,
                 split: str = "equal") -> None:
        super().__init__(timeout_s)
        if split not in ("equal", "weights"):
            raise ValueError(f"WaitForChildren split must be \"equal\" or \"weights\", not "
                             f"{split!r}")
        bad = [i for i, c in enumerate(children) if split == "weights" and not (
            isinstance(c.get("weight"), (int, float)) and not isinstance(c.get("weight"), bool)
            and c["weight"] > 0)]
        if bad:
            raise ValueError(f"WaitForChildren split=\"weights\": children {bad} need a "
                             "positive number as their weight")
        self.children = children
        self.split = split


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

    In a compensate function ``idempotency_key`` is the undo's own key,
    ``"<original key>:undo"``, and ``original_key`` the key of the call being undone.
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
    original_key: str = ""


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
    # None until _spec resolves it: "reversible" only with a compensation (ledger.statuses)
    reversibility: Reversibility | None = None
    approval: ApprovalMode = "never"
    approval_policy: Callable[[dict[str, Any]], str | None] | None = None
    approval_expiry_s: int = 3600
    approval_on_expiry: str = "deny"
    approvers: int = 1  # distinct people (never the requester) who must approve
    timeout: float | None = None
    retry: int = 3
    sensitive: tuple[str, ...] = ()
    concurrency: int | None = None
    rate: int | None = None
    pager: Callable[..., Any] | None = None
    # version_probe() -> the version of what the tool talks to (an API, a schema, a price list)
    version_probe: Callable[[], Any] | None = None
    args_model: Any = None  # the pydantic model of typed arguments (None: explicit schema)
    # argument -> the fact of a probe's answer that must hold the same value (empty: every
    # argument whose name is also a fact of the answer, sensitive ones left out)
    identity: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        declared = self.reversibility
        if declared == "reversible" and self.effect == "write" and self.compensate is None:
            raise ValueError(f"tool {self.name}: reversibility='reversible' needs compensate= "
                             "(a write is reversible only when something undoes it); declare "
                             "compensate=fn, or leave reversibility out (irreversible) or say "
                             "'manual' (a person undoes it by hand)")
        if declared in ("manual", "irreversible") and self.compensate and self.effect == "write":
            raise ValueError(f"tool {self.name}: compensate= undoes it, so it is not "
                             f"{declared}; leave reversibility out (or say 'reversible')")
        object.__setattr__(self, "reversibility", reversibility_of(
            declared, write=self.effect == "write", compensable=self.compensate is not None))

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
        return effect_class_of(effect=self.effect, idempotent=self.idempotent,
                               reversibility=self.reversibility or "")  # set in __post_init__

    def validate(self, args: Any) -> dict[str, Any]:
        """Return ``args`` if they fit the schema, else raise ToolInvalidArguments saying where.

        Nulls the strict schema form sends for optional arguments left out are dropped first.
        """
        if not isinstance(args, dict):
            raise ToolInvalidArguments(f"arguments for {self.name} must be a JSON object",
                                       tool=self.name, path="(top level)")
        args = toolschema.drop_unset_nulls(self.parameters, args)
        quick = quick_check(self.parameters)
        problems = [] if quick is not None and quick(args) else toolschema.schema_problems(
            self._validator(), args)
        if problems:
            raise toolschema.invalid(self.name, problems)
        if self.args_model is not None:  # custom validators the JSON schema cannot express
            toolschema.validate_args(self.args_model, args, tool=self.name)
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

    def schema(self, *, strict: bool = False) -> dict[str, Any]:
        """Return the OpenAI function schema of this tool (``strict``: the providers' strict form)."""
        function: dict[str, Any] = {"name": self.name, "description": self.description,
                                    "parameters": self.parameters}
        if strict:
            function["parameters"] = toolschema.strict_schema(self.parameters)
            function["strict"] = True
        return {"type": "function", "function": function}


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    parameters: dict[str, Any] | None = None,
    description: str | None = None,
    **options: Any,
) -> Any:
    """Declare a tool.

    Args:
        name: the name the model calls (defaults to the function name).
        parameters: a JSON schema for the arguments. If omitted it is derived from the type
            hints (lists, Literal/Enum, pydantic models, ``X | None``) and the docstring's
            ``Args:`` section, every object closed; the function then receives typed values.
        description: what the model reads (defaults to the docstring before its sections).
        effect: "read" or "write". idempotent: True when the tool honours ``ctx.idempotency_key``.
        probe: ``probe(ctx, **args) -> ToolResult | None`` asks the world whether the call ran
            (None = it did not). compensate: ``compensate(ctx, facts, **args)`` undoes it;
            ``ctx.idempotency_key`` is ``"<original key>:undo"`` and it must return a
            ToolResult or dict acknowledging the undo (None is recorded as a failed undo).
        reversibility: "reversible" (needs ``compensate``; its default), "manual" or "irreversible".
        approval ("never" | "always" | "policy" with ``approval_policy(args)``
            returning a reason when a person must approve), approvers (people who must
            approve; 2 = two-person rule), timeout (s), retry (attempts on transient
            errors), sensitive (argument names stored redacted), concurrency, rate (per minute), pager (``pager(ctx, cursor=..., **args)`` returns the page
            after ``cursor``; without it the tool gets ``cursor=``), version_probe (docs/sdk.md).
        identity: the probe's facts that identify the effect (argument names, or
            ``{argument: fact}``; default: every fact named like a non-sensitive argument).
            A fact that differs leaves the call ``unknown`` with both shown (docs/sdk.md).

    Raises:
        ValueError: when the declaration contradicts itself.
    """

    def wrap(f: Callable[..., Any]) -> ToolSpec:
        return _spec(f, name=name, parameters=parameters, description=description,
                     options=dict(options))

    return wrap(fn) if fn is not None else wrap


def _spec(f: Callable[..., Any], *, name: str | None, parameters: dict[str, Any] | None,
          description: str | None, options: dict[str, Any]) -> ToolSpec:
    """Return the checked ToolSpec of ``f`` (typed arguments when no schema is given)."""
    tool_name = name or f.__name__
    model = None
    if "identity" in options:
        options["identity"] = _identity(tool_name, options["identity"])
    if parameters is None:
        model = toolschema.args_model(f, name=tool_name)
        options.update(_typed_hooks(options, model))
    spec = ToolSpec(
        name=tool_name,
        fn=toolschema.typed_call(f, model) if model is not None else f,
        description=description or toolschema.docstring_summary(f),
        parameters=parameters or toolschema.json_schema(model),
        args_model=model,
        **options,
    )
    _check(spec)
    return spec


def _identity(name: str, value: Any) -> dict[str, str]:
    """Return ``identity=`` as {argument: fact}, or raise ValueError saying what is wrong."""
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, dict):
        pairs = dict(value)
    elif isinstance(value, (tuple, list)):
        pairs = {v: v for v in value}
    else:
        raise ValueError(f"tool {name}: identity must be argument names or {{argument: fact}}")
    if not all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in pairs.items()):
        raise ValueError(f"tool {name}: identity names must be non-empty strings")
    return pairs


def _typed_hooks(options: dict[str, Any], model: Any) -> dict[str, Any]:
    """Return probe/compensate wrapped so they, too, receive typed argument values."""
    out = {}
    if options.get("probe") is not None:
        out["probe"] = toolschema.typed_call(options["probe"], model)
    if options.get("compensate") is not None:
        out["compensate"] = toolschema.typed_call(options["compensate"], model, leading=2)
    return out


def _check(spec: ToolSpec) -> None:
    """Raise ValueError when a declaration contradicts itself."""
    if spec.effect not in ("read", "write"):
        raise ValueError(f"tool {spec.name}: effect must be 'read' or 'write'")
    if spec.approval == "policy" and spec.approval_policy is None:
        raise ValueError(f"tool {spec.name}: approval='policy' needs approval_policy=")
    if not isinstance(spec.approvers, int) or not 1 <= spec.approvers <= 5:
        raise ValueError(f"tool {spec.name}: approvers must be a whole number from 1 to 5 "
                         f"(got {spec.approvers!r})")
    if spec.approvers > 1 and spec.approval == "never":
        raise ValueError(f"tool {spec.name}: approvers={spec.approvers} needs approval= "
                         "'always' or 'policy' (nobody is asked otherwise)")
    if spec.identity and spec.probe is None:
        raise ValueError(f"tool {spec.name}: identity= says how to read a probe's answer; "
                         "declare probe= too")
    unknown = sorted(set(spec.identity) - set((spec.parameters or {}).get("properties") or {}))
    if unknown:
        raise ValueError(f"tool {spec.name}: identity names {', '.join(unknown)}, which "
                         "is not among its arguments")
    if spec.version_probe is not None and not callable(spec.version_probe):
        raise ValueError(f"tool {spec.name}: version_probe must be a function of no arguments")
    if spec.compensate is not None and not spec.is_write:
        raise ValueError(f"tool {spec.name}: only a write tool can have compensate=")
    try:
        spec._validator()
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"tool {spec.name}: its parameters schema is invalid: {exc.message}") from None
