"""Notification channels declared once, in settings: parse and check the declaration."""
from __future__ import annotations

import json
from typing import Any

KINDS = ("email", "slack", "webhook")


class ChannelDeclarationError(ValueError):
    """AGENTOPS_NOTIFY_CHANNELS is not a valid declaration; the message says what is wrong."""


def channels_from_setting(raw: str) -> dict[str, dict[str, Any]]:
    """Return the channels declared in ``raw`` (JSON: name → {kind, url, secret}).

    Raises ChannelDeclarationError naming the channel and the field that is wrong.
    """
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ChannelDeclarationError(f"AGENTOPS_NOTIFY_CHANNELS is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ChannelDeclarationError("AGENTOPS_NOTIFY_CHANNELS must be a JSON object of "
                                      "channel name → declaration")
    return {str(name): _channel(str(name), decl) for name, decl in data.items()}


def _channel(name: str, decl: Any) -> dict[str, Any]:
    where = f"AGENTOPS_NOTIFY_CHANNELS[{name!r}]"
    if not isinstance(decl, dict):
        raise ChannelDeclarationError(f"{where} must be an object with a 'kind'")
    kind = decl.get("kind")
    if kind not in KINDS:
        raise ChannelDeclarationError(f"{where}.kind must be one of {', '.join(KINDS)}, "
                                      f"got {kind!r}")
    url = decl.get("url", "")
    if kind != "email" and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ChannelDeclarationError(f"{where}.url must be an http(s) URL for a {kind} channel")
    secret = decl.get("secret", "")
    if kind == "webhook" and not (isinstance(secret, str) and len(secret) >= 16):
        raise ChannelDeclarationError(f"{where}.secret must be a string of at least 16 "
                                      "characters (the HMAC key receivers verify)")
    unknown = set(decl) - {"kind", "url", "secret"}
    if unknown:
        raise ChannelDeclarationError(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
    return {"kind": kind, "url": url, "secret": secret}
