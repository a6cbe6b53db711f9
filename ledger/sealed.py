"""Sealed values: sensitive tool arguments kept encrypted so a resumed run can still use them.

Events, snapshots and the visible ledger hold only the redacted form; the encrypted original
lives in ToolCall.sealed_args and is opened only by the executor (and the rollback's
compensation, which needs the same arguments).

The keys are their own: ``AGENTOPS_SEAL_KEYS`` (Fernet keys, newest first) seal and open; a
key derived from ``SECRET_KEY`` (and from each of ``SECRET_KEY_FALLBACKS``) only opens what
was sealed before seal keys were configured. Rotate by putting a new key first, running
``manage.py agentops rotate-keys`` (re-seals every value with the newest key), then dropping
the old key. Rotating SECRET_KEY never touches sealed values once seal keys are set.

``cryptography`` is imported by the first seal or open, not with this module: a worker
process whose runs seal nothing never maps its ~8 MB library (docs/workers.md "Memory").
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import json
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.conf import settings

from agentops.redaction import Secrets, remember
from ledger.errors import SealedUnreadable

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet


def _fernet() -> ModuleType:
    """Return ``cryptography.fernet``, imported on first use."""
    return importlib.import_module("cryptography.fernet")


def _legacy(secret_key: str) -> Fernet:
    key = hashlib.sha256(("agentops-sealed:" + secret_key).encode()).digest()
    return _fernet().Fernet(base64.urlsafe_b64encode(key))


def seal_keys() -> MultiFernet:
    """Return the seal key ring: configured keys first (the first seals), legacy keys last."""
    fernet = _fernet()
    configured = [fernet.Fernet(k.encode() if isinstance(k, str) else k)
                  for k in getattr(settings, "AGENTOPS_SEAL_KEYS", ()) or ()]
    legacy = [_legacy(settings.SECRET_KEY)]
    legacy += [_legacy(k) for k in getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ()]
    return fernet.MultiFernet(configured + legacy)


def seal(values: dict[str, Any]) -> str:
    """Return ``values`` encrypted with the newest seal key ("" when there is nothing to seal)."""
    if not values:
        return ""
    remember(Secrets.of(values.values()))
    return seal_keys().encrypt(json.dumps(values).encode()).decode()


def unseal(token: str) -> dict[str, Any]:
    """Return the values sealed in ``token``; raise SealedUnreadable when no key opens it."""
    if not token:
        return {}
    keys = seal_keys()
    try:
        values = json.loads(keys.decrypt(token.encode()))
    except _fernet().InvalidToken:
        raise SealedUnreadable("sealed tool arguments cannot be opened with any configured "
                               "seal key (AGENTOPS_SEAL_KEYS, SECRET_KEY, SECRET_KEY_FALLBACKS)"
                               ) from None
    remember(Secrets.of(values.values()))
    return values


def reseal(token: str) -> str:
    """Return ``token`` re-encrypted with the newest seal key (raise SealedUnreadable if stuck)."""
    if not token:
        return token
    keys = seal_keys()
    try:
        return keys.rotate(token.encode()).decode()
    except _fernet().InvalidToken:
        raise SealedUnreadable("sealed tool arguments cannot be opened with any seal key") from None
