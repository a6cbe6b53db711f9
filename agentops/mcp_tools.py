"""Mount the tools of an MCP server as AgentOps tools: every call goes through the ledger.

An MCP server says nothing reliable about side effects, so each mounted tool is declared in
config like a ``@tool``: its effect class, which server tool probes it and which compensates
it, and its approval rule. Tools the config does not name are not mounted.

    support = mcp_tools(McpServer("crm", command=["python", "crm_server.py"]), {
        "find_customer": {"effect": "read"},
        "send_email": {"effect": "write", "idempotent": True, "probe": "find_email",
                       "compensate": "recall_email", "approval": "always"},
    })

Or from settings: ``AGENTOPS_MCP_SERVERS = {"crm": {"command": [...], "tools": {...}}}`` and
``mcp_tools_from_settings("crm")``. A server tool whose input schema has an
``idempotency_key`` property (or the one named by ``key_arg``) gets the call's idempotency
key there; the model never sees that argument. Each call opens its own session (stdio: a
fresh server process; HTTP: a new session), so no connection outlives a worker's crash.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp
from django.conf import settings

from agentops import toolschema
from agentops.errors import ConfigError
from agentops.tools import ToolContext, ToolResult, ToolSpec, tool
from ledger.errors import ToolPermanent, ToolTimeout, ToolTransient

_TOOL_OPTIONS = {"effect", "idempotent", "reversibility", "approval", "approval_policy",
                 "approval_expiry_s", "approval_on_expiry", "timeout", "retry", "sensitive",
                 "concurrency", "rate"}
_MAPPING = {"probe", "compensate", "key_arg", "name"}
_SUMMARY_CHARS = 500


@dataclass(frozen=True)
class McpServer:
    """How to reach an MCP server: a ``command`` (stdio) or a ``url`` (streamable HTTP)."""

    name: str
    command: Sequence[str] = ()
    url: str = ""
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"MCP server {self.name}: give exactly one of command= or url=",
                              server=self.name)

    def target(self) -> Any:
        """Return what ``mcp.Client`` connects to."""
        if self.url:
            return self.url
        return mcp.StdioServerParameters(command=self.command[0], args=list(self.command[1:]),
                                         env=self.env or None)


class _CallFailed(Exception):
    """The session failed after the call was sent (``sent``) or before it was."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def mcp_call(server: McpServer, name: str, args: dict[str, Any]) -> Any:
    """Call one tool on ``server`` in a fresh session and return its CallToolResult."""
    sent = False

    async def go() -> Any:
        nonlocal sent
        async with mcp.Client(server.target(), read_timeout_seconds=server.timeout_s) as client:
            sent = True
            return await client.call_tool(name, args)

    try:
        return anyio.run(go)
    except Exception as exc:  # noqa: BLE001 - transport errors of any kind are classified below
        raise _CallFailed(f"MCP server {server.name}: {type(exc).__name__}: {exc}"[:300],
                          sent=sent) from None


def mcp_list(server: McpServer) -> dict[str, Any]:
    """Return the server's tools by name (each an mcp Tool with ``input_schema``)."""

    async def go() -> dict[str, Any]:
        async with mcp.Client(server.target(), read_timeout_seconds=server.timeout_s) as client:
            listed, cursor = {}, None
            while True:
                page = await client.list_tools(cursor=cursor)
                listed.update({t.name: t for t in page.tools})
                cursor = getattr(page, "next_cursor", None)
                if not cursor:
                    return listed

    try:
        return anyio.run(go)
    except Exception as exc:  # noqa: BLE001 - say which server and why, once, at mount time
        raise ConfigError(f"cannot list the tools of MCP server {server.name}: "
                          f"{type(exc).__name__}: {exc}"[:400], server=server.name) from None


def mcp_tools(server: McpServer, config: dict[str, dict[str, Any]]) -> list[ToolSpec]:
    """Return a ToolSpec for each server tool named in ``config`` (see the module docstring)."""
    listed = mcp_list(server)
    missing = sorted(set(config) - set(listed))
    if missing:
        raise ConfigError(f"MCP server {server.name} has no tools {missing} "
                          f"(it has: {', '.join(sorted(listed))})", server=server.name)
    return [_mount(server, listed, name, dict(options)) for name, options in config.items()]


def mcp_tools_from_settings(server_name: str) -> list[ToolSpec]:
    """Return the tools of the server ``AGENTOPS_MCP_SERVERS[server_name]`` declares."""
    servers = getattr(settings, "AGENTOPS_MCP_SERVERS", {}) or {}
    entry = servers.get(server_name)
    if entry is None:
        raise ConfigError(f"AGENTOPS_MCP_SERVERS has no server {server_name!r} "
                          f"(it has: {', '.join(sorted(servers)) or 'none'})")
    server = McpServer(server_name, command=entry.get("command") or (), url=entry.get("url", ""),
                       env=entry.get("env") or {}, timeout_s=float(entry.get("timeout_s", 30)))
    return mcp_tools(server, entry.get("tools") or {})


def _mount(server: McpServer, listed: dict[str, Any], name: str,
           options: dict[str, Any]) -> ToolSpec:
    """Return the ToolSpec of one configured server tool."""
    unknown = sorted(set(options) - _TOOL_OPTIONS - _MAPPING)
    if unknown:
        raise ConfigError(f"MCP tool {server.name}.{name}: unknown options {unknown}")
    schema = dict(listed[name].input_schema or {"type": "object", "properties": {}})
    key_arg = options.pop("key_arg", "idempotency_key")
    has_key = key_arg in (schema.get("properties") or {})
    visible = toolschema.tidy_schema(_without(schema, key_arg) if has_key else schema)
    hooks = {}
    for role in ("probe", "compensate"):
        target = options.pop(role, None)
        if target is not None:
            if target not in listed:
                raise ConfigError(f"MCP tool {server.name}.{name}: {role} tool {target!r} is "
                                  "not on the server")
            hooks[role] = _hook(server, listed[target], key_arg, role)
    call = _caller(server, name, key_arg if has_key else None)
    description = (listed[name].description or "").strip() or f"{name} (MCP server {server.name})"
    return tool(call, name=options.pop("name", name), parameters=visible,
                description=description, **hooks, **options)


def _without(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """Return ``schema`` without the property ``key`` (which the engine fills)."""
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k != key}
    required = [r for r in schema.get("required") or () if r != key]
    return {**schema, "properties": props, "required": required}


def _caller(server: McpServer, name: str, key_arg: str | None) -> Callable[..., ToolResult]:
    """Return the tool function: call the server tool, fill the key, classify the outcome."""

    def call(ctx: ToolContext, **args: Any) -> ToolResult:
        if key_arg:
            args[key_arg] = ctx.idempotency_key
        try:
            result = mcp_call(server, name, args)
        except _CallFailed as exc:
            if exc.sent:  # it may have run: a write's outcome is ambiguous (probe or unknown)
                raise ToolTimeout(str(exc)) from None
            raise ToolTransient(str(exc)) from None
        if result.is_error:
            raise ToolPermanent(f"{name} refused: {_text(result)[:_SUMMARY_CHARS]}")
        return _result(result)

    call.__name__ = name
    return call


def _hook(server: McpServer, target: Any, key_arg: str, role: str) -> Callable[..., Any]:
    """Return a probe (``(ctx, **args)``) or compensate (``(ctx, facts, **args)``) function."""
    accepted = set((target.input_schema or {}).get("properties") or {})

    def send(ctx: ToolContext, values: dict[str, Any]) -> Any:
        chosen = {k: v for k, v in values.items() if k in accepted}
        if key_arg in accepted:
            chosen[key_arg] = ctx.idempotency_key
        try:
            return mcp_call(server, target.name, chosen)
        except _CallFailed as exc:
            raise ToolTransient(str(exc)) from None

    def probe(ctx: ToolContext, **args: Any) -> ToolResult | None:
        result = send(ctx, args)
        if result.is_error or not _found(result):
            return None
        return _result(result)

    def compensate(ctx: ToolContext, facts: dict[str, Any], **args: Any) -> ToolResult:
        result = send(ctx, {**(facts or {}), **args})
        if result.is_error:
            raise ToolPermanent(f"{target.name} did not undo it: {_text(result)[:300]}")
        return _result(result)

    return probe if role == "probe" else compensate


def _found(result: Any) -> bool:
    """Return True when a probe's answer says the call happened.

    An answer ``{"found": false}`` (structured or as JSON text), an empty answer, or null
    means it did not; anything else is what was found.
    """
    facts = _result(result).facts
    if "found" in facts:
        return bool(facts["found"])
    if set(facts) == {"text"}:
        text = str(facts["text"]).strip().lower()
        return text not in ("", "null", "false", "none", "not found", "{}", "[]")
    if set(facts) == {"result"}:
        return bool(facts["result"])
    return bool(facts)


def _result(result: Any) -> ToolResult:
    """Return an MCP CallToolResult as facts (its structured content) and a summary."""
    data = result.structured_content
    text = _text(result)
    if isinstance(data, dict):
        facts = data
    elif data is not None:
        facts = {"result": data}
    else:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        facts = parsed if isinstance(parsed, dict) else {"text": text[:4000]}
    return ToolResult(facts=facts, summary=text[:_SUMMARY_CHARS] or json.dumps(facts)[:_SUMMARY_CHARS],
                      log=text)


def _text(result: Any) -> str:
    """Return the text blocks of a result, joined."""
    return "\n".join(getattr(b, "text", "") for b in result.content or () if getattr(b, "text", None))
