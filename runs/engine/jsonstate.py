"""The JSON-only rule for state and event data, checked at save time with the key path."""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from runs.errors import NotJSONSerializable

_SCALARS = (bool, int, type(None))


def check_json(value: Any, path: str = "$") -> None:
    """Raise NotJSONSerializable naming the first key path whose value is not plain JSON.

    Strings with NUL characters are refused too: PostgreSQL's jsonb cannot store them.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise NotJSONSerializable(path, "string with a NUL character")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise NotJSONSerializable(path, "string with an unpaired surrogate") from None
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
            check_json(v, f"{path}.{k}")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, f"{path}[{i}]")
        return
    raise NotJSONSerializable(path, type(value).__name__)


def strip_nul(text: str) -> str:
    """Return ``text`` without NULs or unpaired surrogates (model output may contain them)."""
    text = text.replace("\x00", "\ufffd") if "\x00" in text else text
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_json(value: Any) -> str:
    """Return the sha256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
