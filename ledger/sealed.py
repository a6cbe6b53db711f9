"""Sealed values: sensitive tool arguments kept encrypted so a resumed run can still use them.

Events, snapshots and the visible ledger hold only the redacted form; the encrypted original
lives in ToolCall.sealed_args and is opened only by the executor.
"""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings


def _fernet() -> Fernet:
    key = hashlib.sha256(("agentops-sealed:" + settings.SECRET_KEY).encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(values: dict[str, Any]) -> str:
    """Return ``values`` encrypted (empty string when there is nothing to seal)."""
    if not values:
        return ""
    return _fernet().encrypt(json.dumps(values).encode()).decode()


def unseal(token: str) -> dict[str, Any]:
    """Return the values sealed in ``token``."""
    if not token:
        return {}
    return json.loads(_fernet().decrypt(token.encode()))
