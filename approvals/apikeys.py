"""Per-user API keys: created once in clear, stored as a sha256 hash, revocable."""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from agentops import clock
from agentops.errors import NotFound
from approvals.models import ApiKey

KEY_PREFIX = "ao_"
# last_used_at is for people ("used 3 minutes ago"); writing it on every request would
# turn each read into a write, so it is refreshed at most once per interval.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class ApiKeyNotFound(NotFound):
    """No live key with that id belongs to the caller."""

    code = "api_key_not_found"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def apikey_create(*, user: Any, name: str) -> tuple[ApiKey, str]:
    """Create a key for ``user``; return the row and the clear key (shown only this once)."""
    public = secrets.token_hex(4)
    raw = f"{KEY_PREFIX}{public}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        user=user, name=name, prefix=f"{KEY_PREFIX}{public}", key_hash=_hash(raw)
    )
    return key, raw


def apikey_verify(*, raw: str) -> Any | None:
    """Return the active user a live key belongs to, or None; stamp its last use."""
    if not raw.startswith(KEY_PREFIX) or len(raw) > 200:
        return None
    key = (
        ApiKey.objects.select_related("user")
        .filter(key_hash=_hash(raw), revoked_at__isnull=True)
        .first()
    )
    if key is None or not key.user.is_active:
        return None
    now = clock.now()
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key.user


def apikey_list(*, user: Any) -> QuerySet[ApiKey]:
    """Return the caller's keys, newest first (hashes are never shown)."""
    return ApiKey.objects.filter(user=user).order_by("-created_at", "-id")


def apikey_revoke(*, user: Any, key_id: int) -> ApiKey:
    """Revoke one of the caller's keys; revoking twice keeps the first revocation time."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(pk=key_id, user=user).first()
        if key is None:
            raise ApiKeyNotFound(f"no API key {key_id} of yours", key_id=key_id)
        if key.revoked_at is None:
            key.revoked_at = clock.now()
            key.save(update_fields=["revoked_at"])
    return key
