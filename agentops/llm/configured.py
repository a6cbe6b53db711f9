"""The model an agent gets from settings: provider, endpoint, key, limits and options.

``AGENTOPS_MODEL_PROVIDER`` picks the client ("openai" for any OpenAI-compatible endpoint:
OpenAI, vLLM, Ollama, llama.cpp; "anthropic" for the Messages API); the other
``AGENTOPS_MODEL_*`` settings configure it. An Agent without ``model=`` uses this.
This is the only module that knows both clients; they know neither it nor each other. Each
is imported only when asked for, so a process loads one provider's SDK, not both.

A process keeps ONE configured client (``model_from_settings``): its HTTP lanes keep a
connection per run in flight alive (agentops.llm.http_lanes), instead of a new client (and
TCP/TLS set-up) per run.
It is rebuilt when the settings it was built from change (tests override them).
"""
from __future__ import annotations

import threading

from django.conf import settings

from agentops.errors import ConfigError
from agentops.llm.protocol import ModelClient, ModelOptions

PROVIDERS = ("openai", "anthropic")
_KNOBS = ("AGENTOPS_MODEL_PROVIDER", "AGENTOPS_MODEL_BASE_URL", "AGENTOPS_MODEL_API_KEY",
          "AGENTOPS_MODEL_NAME", "AGENTOPS_MODEL_TIMEOUT_S", "AGENTOPS_MODEL_CONTEXT_WINDOW",
          "AGENTOPS_MODEL_TOOL_CHOICE", "AGENTOPS_MODEL_FORCE_TURNS",
          "AGENTOPS_MODEL_STRICT_TOOLS", "AGENTOPS_MODEL_REPAIR_TURNS", "AGENTOPS_MODEL_STREAM",
          "AGENTOPS_MODEL_MAX_TOKENS", "AGENTOPS_RUNS_IN_FLIGHT")
_cached: dict[str, object] = {"key": None, "client": None}
_cache_lock = threading.Lock()


def _setting(name: str, default: object = "") -> object:
    return getattr(settings, name, default)


def model_provider() -> str:
    """Return the configured provider, or raise ConfigError naming the choices."""
    provider = str(_setting("AGENTOPS_MODEL_PROVIDER", "openai") or "openai").lower()
    if provider not in PROVIDERS:
        raise ConfigError(f"AGENTOPS_MODEL_PROVIDER={provider!r} is not one of "
                          f"{', '.join(PROVIDERS)}", setting="AGENTOPS_MODEL_PROVIDER")
    return provider


def model_configured() -> bool:
    """Return True when settings name a real model (so an agent can use it with no code)."""
    if not _setting("AGENTOPS_MODEL_NAME"):
        return False
    return bool(_setting("AGENTOPS_MODEL_BASE_URL")) or model_provider() == "anthropic"


def model_options() -> ModelOptions:
    """Return the ModelOptions the settings ask for."""
    choice = str(_setting("AGENTOPS_MODEL_TOOL_CHOICE", "auto") or "auto")
    if choice not in ("auto", "required"):
        raise ConfigError(f"AGENTOPS_MODEL_TOOL_CHOICE={choice!r} must be 'auto' or 'required'",
                          setting="AGENTOPS_MODEL_TOOL_CHOICE")
    max_tokens = int(_setting("AGENTOPS_MODEL_MAX_TOKENS", 0) or 0)
    return ModelOptions(
        tool_choice=choice,  # type: ignore[arg-type]
        force_turns=int(_setting("AGENTOPS_MODEL_FORCE_TURNS", 2)),
        strict=bool(_setting("AGENTOPS_MODEL_STRICT_TOOLS", False)),
        repair_turns=int(_setting("AGENTOPS_MODEL_REPAIR_TURNS", 1)),
        stream=bool(_setting("AGENTOPS_MODEL_STREAM", False)),
        max_tokens=max_tokens or None,
    )


def model_from_settings(options: ModelOptions | None = None) -> ModelClient:
    """Return the configured provider's client, or raise ConfigError saying what to set.

    Without ``options`` this is the process's one configured client, built on first use and
    again only when one of the settings it reads has changed.
    """
    if options is not None:
        return _build(options)
    key = tuple(repr(_setting(name, None)) for name in _KNOBS)
    with _cache_lock:
        if _cached["key"] != key:
            _cached["client"] = _build(None)
            _cached["key"] = key
        return _cached["client"]  # type: ignore[return-value]


def _build(options: ModelOptions | None) -> ModelClient:
    if model_provider() == "anthropic":
        return anthropic_from_settings(options)
    return openai_from_settings(options)


def _require(*names: str, provider: str) -> None:
    missing = [n for n in names if not _setting(n)]
    if missing:
        raise ConfigError(
            f"Set {' and '.join(missing)} to use the {provider} model client "
            "(e.g. AGENTOPS_MODEL_BASE_URL=http://127.0.0.1:8080/v1).", missing=missing)


def openai_from_settings(options: ModelOptions | None = None) -> ModelClient:
    """Return an OpenAICompatClient built from the AGENTOPS_MODEL_* settings."""
    _require("AGENTOPS_MODEL_BASE_URL", "AGENTOPS_MODEL_NAME", provider="OpenAI-compatible")
    from agentops.llm.openai_compat import OpenAICompatClient

    return OpenAICompatClient(
        base_url=str(_setting("AGENTOPS_MODEL_BASE_URL")),
        api_key=str(_setting("AGENTOPS_MODEL_API_KEY") or ""),
        model=str(_setting("AGENTOPS_MODEL_NAME")),
        timeout_s=float(_setting("AGENTOPS_MODEL_TIMEOUT_S", 60)),
        context_window=int(_setting("AGENTOPS_MODEL_CONTEXT_WINDOW", 8192)),
        options=options or model_options(),
        keep_alive=_keep_alive(),
    )


def anthropic_from_settings(options: ModelOptions | None = None) -> ModelClient:
    """Return an AnthropicClient built from the AGENTOPS_MODEL_* settings."""
    _require("AGENTOPS_MODEL_NAME", provider="Anthropic")
    from agentops.llm.anthropic_client import AnthropicClient

    return AnthropicClient(
        base_url=str(_setting("AGENTOPS_MODEL_BASE_URL") or "") or None,
        api_key=str(_setting("AGENTOPS_MODEL_API_KEY") or ""),
        model=str(_setting("AGENTOPS_MODEL_NAME")),
        timeout_s=float(_setting("AGENTOPS_MODEL_TIMEOUT_S", 60)),
        context_window=int(_setting("AGENTOPS_MODEL_CONTEXT_WINDOW", 200_000)),
        options=options or model_options(),
        keep_alive=_keep_alive(),
    )


def _keep_alive() -> int | None:
    """Return the idle connections to keep: one per run in flight (None: the SDK's default)."""
    in_flight = int(_setting("AGENTOPS_RUNS_IN_FLIGHT", 1) or 1)
    return in_flight if in_flight > 1 else None
