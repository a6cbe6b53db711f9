"""The JSON-only rule for state and event data, checked at save time with the key path."""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from json.encoder import c_make_encoder as _c_make_encoder
from json.encoder import encode_basestring as _plain_str
from json.encoder import encode_basestring_ascii as _ascii_str
from typing import Any

from agentops.errors import InvalidInput

_SCALARS = (bool, int, type(None))
_PLAIN = frozenset({bool, int, type(None)})


class NotJSONSerializable(InvalidInput):
    """State or event data holds a value that is not JSON; ``path`` names where."""

    code = "not_json"

    def __init__(self, path: str, type_name: str) -> None:
        super().__init__(
            f"value at {path} is a {type_name}, which is not JSON "
            "(use str/int/float/bool/None/list/dict with string keys)",
            path=path,
            type=type_name,
        )
        self.path = path


def check_json(value: Any, path: str = "$") -> None:
    """Raise NotJSONSerializable naming the first key path whose value is not plain JSON.

    Strings with NUL characters are refused too: PostgreSQL's jsonb cannot store them.
    """
    if json_plain(value):
        return
    if isinstance(value, str):
        why = unstorable(value)
        if why:
            raise NotJSONSerializable(path, why)
        return
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSONSerializable(path, f"non-finite float ({value})")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotJSONSerializable(f"{path}.<key {k!r}>", type(k).__name__)
            why = unstorable(k)
            if why:
                raise NotJSONSerializable(f"{path}.<key {k!r}>", why)
            check_json(v, f"{path}.{k}")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, f"{path}[{i}]")
        return
    raise NotJSONSerializable(path, type(value).__name__)


def json_plain(value: Any) -> bool:
    """Return True when ``check_json`` accepts ``value`` for sure: plain JSON of the exact
    built-in types, every string storable. Makes no key paths (walked on every event and
    unit); False: ``check_json``'s general walk decides (subclasses) or names the path."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or "\x00" in k or (not k.isascii() and unstorable(k)):
                return False
            kind = type(v)
            if kind is str:
                if "\x00" in v or (not v.isascii() and unstorable(v)):
                    return False
            elif kind not in _PLAIN and not json_plain(v):
                return False
        return True
    if kind is list:
        for v in value:
            kind = type(v)
            if kind is str:
                if "\x00" in v or (not v.isascii() and unstorable(v)):
                    return False
            elif kind not in _PLAIN and not json_plain(v):
                return False
        return True
    if kind is str:
        return "\x00" not in value and (value.isascii() or not unstorable(value))
    if kind is float:
        return math.isfinite(value)
    return kind in _PLAIN


def unstorable(text: str) -> str:
    """Return why PostgreSQL cannot store ``text`` (NUL, lone UTF-16 surrogate), else ""."""
    if "\x00" in text:
        return "string with a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "string with an unpaired UTF-16 surrogate"
    return ""


def unstorable_path(value: Any, path: str = "$") -> tuple[str, str]:
    """Return (key path, reason) of the first string in ``value`` (keys too) that PostgreSQL
    cannot store, or ("", "") when there is none. Other values are not looked at."""
    if isinstance(value, str):
        why = unstorable(value)
        return (path, why) if why else ("", "")
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and unstorable(k):
                return f"{path}.<key {k!r}>", unstorable(k)
            found = unstorable_path(v, f"{path}.{k}")
            if found[0]:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = unstorable_path(v, f"{path}[{i}]")
            if found[0]:
                return found
    return "", ""


def strip_nul(text: str) -> str:
    """Return ``text`` without NULs or unpaired surrogates (model output may contain them)."""
    text = text.replace("\x00", "\ufffd") if "\x00" in text else text
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def json_encoder(*, sort_keys: bool = False, compact: bool = False,
                 ensure_ascii: bool = True) -> Callable[[Any], str]:
    """Return a function encoding a value exactly as ``json.dumps`` with these options does.

    Made once per caller: ``json.dumps`` with any option builds a JSONEncoder on every call,
    and ``JSONEncoder.encode`` builds its C encoder on every call too; the engine encodes
    a few dozen small documents per step. The same C encoder writes the text, so it is the
    same text; only a circular structure (never JSON) fails differently (RecursionError).
    """
    item, key = (",", ":") if compact else (", ", ": ")
    encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(item, key),
                               ensure_ascii=ensure_ascii)
    if _c_make_encoder is None:  # an interpreter without the C accelerator
        return encoder.encode
    strings = _ascii_str if ensure_ascii else _plain_str
    chunks = _c_make_encoder(None, encoder.default, strings, None, key, item, sort_keys,
                             False, True)
    join = "".join

    def encode(value: Any) -> str:
        return join(chunks(value, 0))

    return encode


_CANONICAL = json_encoder(sort_keys=True, compact=True, ensure_ascii=False)
_COMPACT = json_encoder(compact=True, ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (sorted keys, no spaces)."""
    return _CANONICAL(value)


def compact_json(value: Any) -> str:
    """Return the JSON text of ``value`` without spaces, keys in their order, non-ASCII as is."""
    return _COMPACT(value)


def sha256_json(value: Any) -> str:
    """Return the sha256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
