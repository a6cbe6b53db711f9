"""The agent SDK: an Agent is a name, a version, a prompt, tools, a plan and a model.

Agents register themselves in modules listed in settings.AGENTOPS_AGENTS; a run is pinned to
the (name, version) it started with.
"""
from __future__ import annotations

import difflib
import importlib
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from django.conf import settings

from agentops.llm.configured import model_from_settings
from agentops.llm.protocol import ModelClient
from agentops.tools import ToolSpec
from runs.errors import UnknownAgent

BUILT_IN = frozenset({"next_page", "expand_result"})  # the engine's own tools (see Agent.tool)


@dataclass(frozen=True)
class StepSpec:
    """One step of a fixed plan, and what must be true for it to count as done.

    Args:
        tools: the tools the model is offered in this step (default: all the agent's tools);
            with ``ModelOptions(tool_choice="required")`` a step offering exactly one tool
            forces that tool on its first turn.
        requires_tools: tools that must have succeeded in this step (by name, at least once).
        requires_facts: fact keys that a successful call of this step must have returned.
        output_schema: a JSON schema the model's final answer (a JSON object) must fit.
        allow_rejection: a person rejecting a required tool ends the step (the run then
            finishes "completed with exceptions"); by default the run blocks instead.
        optional: declared but not in the plan a run starts with; an operator may add it
            when editing a run's plan (the ``edit_plan`` action).
        requires_count: fact key -> the total the step's successful calls must reach for it
            (a number fact adds its value, a list fact its length), given as a number or as
            the name of a run input holding one (or a list, counted). Short of it, the model
            is told once what is missing; stopping short again ends the step and the run
            finishes "completed with exceptions" naming the count reached.
    """

    key: str
    title: str = ""
    depends_on: tuple[str, ...] = ()
    input: dict[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    requires_tools: tuple[str, ...] = ()
    requires_facts: tuple[str, ...] = ()
    output_schema: dict[str, Any] | None = None
    allow_rejection: bool = False
    optional: bool = False
    requires_count: Mapping[str, int | str] = field(default_factory=dict)

    def completion(self) -> dict[str, Any]:
        """Return the declared completion as stored in events ({} when none is declared)."""
        out: dict[str, Any] = {}
        if self.requires_tools:
            out["tools"] = list(self.requires_tools)
        if self.requires_facts:
            out["facts"] = list(self.requires_facts)
        if self.output_schema is not None:
            out["output_schema"] = self.output_schema
        if self.requires_count:
            out["counts"] = dict(self.requires_count)
        if out and self.allow_rejection:
            out["allow_rejection"] = True
        return out

    def as_json(self) -> dict[str, Any]:
        """Return the step as it is stored in events."""
        out = {"key": self.key, "title": self.title or self.key,
               "depends_on": list(self.depends_on), "input": self.input}
        if self.completion():
            out["completion"] = self.completion()
        if self.tools:
            out["tools"] = list(self.tools)
        return out


@dataclass(frozen=True)
class Budget:
    """Default limits for runs of an agent (None = no limit)."""

    tokens: int | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    cost_micros: int | None = None
    seconds: int | None = None
    # Failed attempts across all the run's steps before it blocks (failure_budget); None:
    # the budget policy's, else AGENTOPS_RUN_FAILURE_LIMIT.
    failures: int | None = None
    # Past the deadline: "block" (for a person) or "terminate"; "": policy, then setting.
    on_deadline: str = ""

    def __post_init__(self) -> None:
        if self.on_deadline not in ("", "block", "terminate"):
            raise ValueError(f"Budget.on_deadline must be \"block\" or \"terminate\", "
                             f"not {self.on_deadline!r}")


@dataclass
class Agent:
    """An agent definition.

    ``model`` is a ModelClient, a factory called per run, or None (the default): the model
    the AGENTOPS_MODEL_* settings describe (agentops.llm.configured).
    """

    name: str
    version: str
    system_prompt: str
    tools: Sequence[ToolSpec]
    plan: Sequence[StepSpec] | None = None
    model: ModelClient | Callable[[], ModelClient] | None = None
    budget: Budget = field(default_factory=Budget)
    max_turns_per_step: int = 20
    drift_threshold: float | None = None
    drift_every: int = 0
    drift_model: ModelClient | Callable[[], ModelClient] | None = None

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError(f"agent {self.name}: duplicate tool names in {names}")
        if self.plan is not None:
            _check_dag(self.name, [s.as_json() for s in self.plan])
            _check_dag(self.name, [s.as_json() for s in self.plan if not s.optional])
            _check_completion(self.name, self.plan, set(names))
            unknown = sorted({n for s in self.plan for n in s.tools} - set(names) - BUILT_IN)
            if unknown:
                raise ValueError(f"agent {self.name}: plan steps name unknown tools {unknown}")
        self._tools = {t.name: t for t in self.tools}

    def tool(self, name: str) -> ToolSpec | None:
        """Return the tool called ``name`` (or a built-in: next_page, expand_result), or None."""
        spec = self._tools.get(name)
        if spec is None and name in BUILT_IN:
            # Late: this SDK module is imported before Django is set up; these read models.
            from ledger.services.expand import expand_result_spec
            from ledger.services.paging import next_page_spec

            spec = next_page_spec(self) if name == "next_page" else expand_result_spec()
            self._tools[name] = spec
        return spec

    def model_client(self) -> ModelClient:
        """Return the model client for a run of this agent (from settings when ``model`` is None)."""
        model = self.model
        if model is None:
            return model_from_settings()
        return model if hasattr(model, "complete") else model()  # type: ignore[operator]


def _check_dag(agent: str, steps: list[dict[str, Any]]) -> None:
    keys = [s["key"] for s in steps]
    if len(keys) != len(set(keys)):
        raise ValueError(f"agent {agent}: duplicate step keys in plan")
    seen: set[str] = set()
    for s in steps:
        missing = [d for d in s["depends_on"] if d not in seen]
        if missing:
            raise ValueError(
                f"agent {agent}: step {s['key']} depends on {missing}, which are not earlier steps"
            )
        seen.add(s["key"])


def _check_completion(agent: str, plan: Sequence[StepSpec], tools: set[str]) -> None:
    for s in plan:
        unknown = [t for t in s.requires_tools if t not in tools]
        if unknown:
            raise ValueError(f"agent {agent}: step {s.key} requires tools {unknown}, which "
                             f"the agent does not have (tools: {sorted(tools)})")
        for key, need in s.requires_count.items():
            if isinstance(need, bool) or not (isinstance(need, int) and need > 0
                                              or isinstance(need, str) and need):
                raise ValueError(f"agent {agent}: step {s.key} requires_count[{key!r}] must be "
                                 f"a positive number or a run input name, not {need!r}")
        if s.output_schema is not None:
            try:
                jsonschema.validators.validator_for(s.output_schema).check_schema(
                    s.output_schema)
            except jsonschema.exceptions.SchemaError as exc:
                raise ValueError(f"agent {agent}: step {s.key} output_schema is not a valid "
                                 f"JSON schema: {exc.message}") from None


def plan_check(agent: str, steps: Any) -> list[dict[str, Any]]:
    """Return a model-proposed plan normalised, or raise ValueError saying what is wrong."""
    if not isinstance(steps, list) or not steps:
        raise ValueError("a plan is a non-empty list of steps")
    out = []
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or not isinstance(s.get("key"), str) or not s["key"]:
            raise ValueError(f"plan step {i} needs a non-empty string 'key'")
        deps = s.get("depends_on", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise ValueError(f"plan step {s['key']}: depends_on must be a list of keys")
        step = {"key": s["key"], "title": str(s.get("title") or s["key"]),
                "depends_on": deps, "input": s.get("input") or {}}
        if isinstance(s.get("tools"), list) and all(isinstance(t, str) for t in s["tools"]):
            step["tools"] = s["tools"]
        out.append(step)
    _check_dag(agent, out)
    return out


class Registry:
    """Agents by (name, version); the newest registered version is the default."""

    def __init__(self) -> None:
        self._agents: dict[tuple[str, str], Agent] = {}
        self._latest: dict[str, str] = {}
        self._origins: dict[tuple[str, str], str] = {}  # the module that registered each
        # Agent modules that failed to import, with the error: their runs block naming it.
        self._broken: dict[str, str] = {}
        self._configured: set[tuple[str, str]] = set()  # registered by AGENTOPS_AGENTS
        self._migrators: dict[tuple[str, str], tuple[str, Callable[..., Any]]] = {}
        self._loaded = False
        # Re-entrant: an agent module may call the registry while it is being imported.
        self._load_lock = threading.RLock()
        self._loading = False

    def register(self, agent: Agent) -> Agent:
        """Add ``agent``; the last registered version of a name becomes its default.

        Raises:
            ValueError: while the AGENTOPS_AGENTS modules load, the same name and version
                is already registered with a different definition: one would silently
                replace the other. (Registering again later, as tests do, replaces it.)
        """
        key = (agent.name, agent.version)
        origin = sys._getframe(1).f_globals.get("__name__", "?")
        first = self._agents.get(key)
        if first is not None and self._loading and _definition(first) != _definition(agent):
            raise ValueError(
                f"agent {agent.name}@{agent.version} is registered twice with different "
                f"definitions: first in {self._origins.get(key, '?')}, then in {origin}; "
                "give the new definition another version (or another name)")
        self._agents[key] = agent
        self._origins[key] = origin
        if self._loading:
            self._configured.add(key)
        self._latest[agent.name] = agent.version
        return agent

    def register_migrator(self, name: str, from_version: str, to_version: str,
                          fn: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> None:
        """Register how runs pinned to ``name@from_version`` move to ``to_version``.

        ``fn(state)`` returns the events (``{"type", "data"}``, e.g. a ``plan.accepted`` with
        renamed steps) that adapt the run; an empty list when the state needs no change.
        """
        self._migrators[(name, from_version)] = (to_version, fn)

    def migration_path(self, name: str, from_version: str) -> list[tuple[str, Callable[..., Any]]]:
        """Return the migrators from ``from_version`` to a registered version ([] if none)."""
        self._load()
        path, version, seen = [], from_version, {from_version}
        while (name, version) not in self._agents:
            step = self._migrators.get((name, version))
            if step is None or step[0] in seen:
                return []
            path.append(step)
            version = step[0]
            seen.add(version)
        return path

    def get(self, name: str, version: str | None = None) -> Agent:
        """Return the agent, or raise UnknownAgent naming what is registered."""
        self._load()
        version = version or self._latest.get(name)
        agent = self._agents.get((name, version or ""))
        if agent is None:
            broken = {"broken_modules": dict(self._broken)} if self._broken else {}
            raise UnknownAgent(self._unknown_message(name, version), agent=name,
                               version=version, **broken)
        return agent

    def _unknown_message(self, name: str, version: str | None) -> str:
        known = sorted(f"{n}@{v}" for n, v in self._agents)
        if version:
            text = f"no agent {name}@{version} is registered"
        else:
            text = f"no agent named {name} is registered"
            close = difflib.get_close_matches(name, list(self._latest), n=1)
            if close:
                text += f" (did you mean {close[0]}?)"
        # The broken module is the likely cause: it comes before the (long) list of the known.
        for module, error in self._broken.items():
            text += f"; agent module {module} failed to import: {error}"
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        return text + f"; known: {shown or 'none'}"

    def configured(self) -> list[Agent]:
        """Return the agents the AGENTOPS_AGENTS modules registered, by name and version."""
        self._load()
        # Registered while the modules loaded, or by one of them imported earlier (doctor).
        modules = set(settings.AGENTOPS_AGENTS)
        return [a for k, a in sorted(self._agents.items())
                if k in self._configured or self._origins.get(k) in modules]

    def broken_modules(self) -> dict[str, str]:
        """Return the configured agent modules that failed to import, with their error."""
        self._load()
        return dict(self._broken)

    def has(self, name: str, version: str) -> bool:
        """Return True when that exact version is registered."""
        self._load()
        return (name, version) in self._agents

    def names(self) -> list[str]:
        """Return the registered agent names."""
        self._load()
        return sorted(self._latest)

    def _load(self) -> None:
        """Import the agent modules once, before any caller reads the registry.

        Concurrent first callers (a cold process serving many requests at once) wait for
        the one import; ``_loaded`` turns True only once every module was tried, so nobody
        sees a half-filled registry. A module that fails to import takes only its own
        agents down: the error is kept (``broken_modules``), and a run of an agent that is
        not registered is blocked naming it. A worker refuses to start with a broken
        module (runs.cli.worker); a changed module needs a restart either way.
        """
        if self._loaded:
            return
        with self._load_lock:
            if self._loaded or self._loading:  # _loading: a module of ours calls back in
                return
            self._loading = True
            try:
                for module in settings.AGENTOPS_AGENTS:
                    self._import(module)
                self._loaded = True
            finally:
                self._loading = False

    def _import(self, module: str) -> None:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any error in an author's module is reported
            self._broken[module] = f"{type(exc).__name__}: {exc}"
        else:
            self._broken.pop(module, None)


def _definition(agent: Agent) -> tuple[Any, ...]:
    """Return what makes two registrations of a name and version the same agent."""
    tools = tuple((t.name, t.effect, t.description) for t in agent.tools)
    plan = None if agent.plan is None else tuple(repr(s.as_json()) for s in agent.plan)
    return (agent.system_prompt, tools, plan, agent.budget, agent.max_turns_per_step)


registry = Registry()
