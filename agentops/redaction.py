"""Secrets and their scrubbing: the one function every write boundary calls.

A secret is a value AgentOps knows must never be stored or shown: the value of a tool
argument declared ``sensitive``, or a configured secret (the model API key, the metrics
token, the values of the environment variables named in ``AGENTOPS_SECRET_ENV``...).
``Secrets.scrub`` replaces every occurrence of one (in strings, dict keys' values, numbers
equal to it) by a keyed marker ``[redacted hmac:…]``: the same secret always gives the same
marker, so two redacted values can be compared, but without the redaction key the marker
says nothing (a 6-digit PIN cannot be recovered by hashing all million PINs).

Every process also remembers the secrets it handled (bounded), so the log formatter can
scrub lines written by any code, including lines added later.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

# Short values (a 2-digit count, "yes") would scrub innocent text; secrets are longer.
MIN_SECRET_LEN = 4
_REMEMBERED_MAX = 2048
_remembered: OrderedDict[str, None] = OrderedDict()
_lock = threading.Lock()


def redaction_key() -> bytes:
    """Return the key of redaction markers: AGENTOPS_REDACTION_KEY, else derived from SECRET_KEY."""
    key = getattr(settings, "AGENTOPS_REDACTION_KEY", "") or ""
    if key:
        return key.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"agentops-redaction-marker",
                    hashlib.sha256).digest()


def marker(value: Any) -> str:
    """Return the keyed redaction marker of ``value`` (HMAC-SHA256, first 16 hex digits)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    digest = hmac.new(redaction_key(), text.encode(), hashlib.sha256).hexdigest()[:16]
    return f"[redacted hmac:{digest}]"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return ""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Secrets:
    """A set of secret strings and the scrubbing of values that may contain them."""

    values: frozenset[str] = frozenset()

    @classmethod
    def of(cls, values: Iterable[Any]) -> Secrets:
        """Return the secrets among ``values`` (too-short values are not secrets)."""
        texts = (_as_text(v) for v in values)
        return cls(frozenset(t for t in texts if len(t) >= MIN_SECRET_LEN))

    def __or__(self, other: Secrets) -> Secrets:
        # Frozen: an empty side gives back the other one as it is (every tool call joins
        # its own, its run's and the configured secrets, most of them empty).
        if not other.values:
            return self
        if not self.values:
            return other
        return Secrets(self.values | other.values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def _ordered(self) -> list[str]:
        # Longest first: a secret that contains another is replaced whole.
        return sorted(self.values, key=len, reverse=True)

    def found_in(self, text: str) -> bool:
        """Return True when ``text`` contains a secret (raw or JSON-escaped)."""
        return any(form in text for v in self.values for form in _forms(v))

    def scrub_text(self, text: str) -> str:
        """Return ``text`` with every secret (raw or JSON-escaped) replaced by its marker."""
        if not self.values:
            return text
        for value in self._ordered():
            for form in _forms(value):
                if form in text:
                    text = text.replace(form, marker(value))
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """Return ``data`` with every secret's UTF-8 bytes replaced by its marker."""
        for value in self._ordered():
            raw = value.encode()
            if raw in data:
                data = data.replace(raw, marker(value).encode())
        return data

    def scrub(self, node: Any, *, engine: bool = False) -> Any:
        """Return ``node`` (JSON-like) with secrets replaced.

        ``engine=True`` is the guard on what the engine writes (events, Run columns): numbers
        and identifiers (ids, hashes, UUIDs) are the engine's own and stay as they are, so a
        short secret that happens to occur inside a call id cannot corrupt the id.
        """
        if not self.values:
            return node
        if isinstance(node, str):
            return node if engine and _IDENT.fullmatch(node) else self.scrub_text(node)
        if isinstance(node, dict):
            return {self.scrub_text(k) if isinstance(k, str) else k: self.scrub(v, engine=engine)
                    for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [self.scrub(v, engine=engine) for v in node]
        if isinstance(node, (int, float)) and not isinstance(node, bool) and not engine:
            text = json.dumps(node)
            return marker(node) if text in self.values else node
        return node


_IDENT = re.compile(r"(?:[a-z]{1,8}_)?[0-9a-f]{24,}|"
                    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@lru_cache(maxsize=4096)
def _forms(value: str) -> tuple[str, ...]:
    """Return how ``value`` can appear in text: as is, and JSON-escaped (UTF-8 or ASCII)."""
    forms = [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]]
    return tuple(dict.fromkeys(forms))


EMPTY = Secrets()


def configured_secrets() -> Secrets:
    """Return the secrets of this installation's configuration (API keys, tokens, env values)."""
    secrets, env_names = _from_settings()
    if env_names:  # read each time: the environment may change under the same settings
        secrets = secrets | Secrets.of(v for v in map(os.environ.get, env_names) if v)
    return secrets


@lru_cache(maxsize=1)
def _from_settings() -> tuple[Secrets, tuple[str, ...]]:
    """Return (the secrets the settings hold, the names in AGENTOPS_SECRET_ENV).

    Made once and forgotten when a setting changes (override_settings): every tool call
    reads it, and a setting left unset costs an AttributeError inside each getattr.
    """
    names = ("AGENTOPS_MODEL_API_KEY", "AGENTOPS_METRICS_TOKEN", "AGENTOPS_REDACTION_KEY")
    values: list[Any] = [getattr(settings, n, "") for n in names]
    values.extend(getattr(settings, "AGENTOPS_SEAL_KEYS", ()) or ())
    values.extend(getattr(settings, "AGENTOPS_CHECKPOINT_KEYS", ()) or ())
    values.extend(getattr(settings, "AGENTOPS_SECRET_VALUES", ()) or ())
    env_names = tuple(getattr(settings, "AGENTOPS_SECRET_ENV", ()) or ())
    return Secrets.of(v for v in values if v), env_names


setting_changed.connect(lambda **_: _from_settings.cache_clear(), weak=False,
                        dispatch_uid="agentops.redaction.settings_part")


def remember(secrets: Secrets) -> None:
    """Add ``secrets`` to this process's memory, which the log formatter scrubs."""
    if not secrets:
        return
    with _lock:
        for value in secrets.values:
            _remembered[value] = None
            _remembered.move_to_end(value)
        while len(_remembered) > _REMEMBERED_MAX:
            _remembered.popitem(last=False)


def known_secrets() -> Secrets:
    """Return every secret this process knows: configured plus remembered."""
    with _lock:
        remembered = frozenset(_remembered)
    try:
        configured = configured_secrets()
    except Exception:  # noqa: BLE001 - logging before settings are ready must still work
        configured = EMPTY
    return Secrets(remembered) | configured


def scrub_stream(src: Any, dst: Any, secrets: Secrets, *, chunk: int = 1 << 20) -> None:
    """Copy binary ``src`` to ``dst`` scrubbed of ``secrets``, holding about one chunk at a time.

    The last (longest secret - 1) bytes of each chunk are carried into the next, so a secret
    split across two reads is still found.
    """
    keep = max((len(v.encode()) for v in secrets.values), default=1) - 1
    src.seek(0)
    carry = b""
    while True:
        block = src.read(chunk)
        if not block:
            break
        data = secrets.scrub_bytes(carry + block)
        cut = max(len(data) - keep, 0)
        dst.write(data[:cut])
        carry = data[cut:]
    dst.write(secrets.scrub_bytes(carry))
    dst.flush()
