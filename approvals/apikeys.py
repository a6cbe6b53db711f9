"""API keys: each belongs to one person, one team and one role, and never outranks its owner.

A key is shown in clear once (at creation or rotation) and stored as a sha256 hash. What a
request made with it may do is worked out in approvals.roles from the key's scope
(``KeyScope``) and what its owner holds in the key's team now (docs/security.md, API keys).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from agentops import clock
from agentops.errors import AgentOpsError, InvalidInput, NotFound
from approvals import roles
from approvals.audit import audit_record
from approvals.models import ApiKey
from runs.models import Team
from runs.models.team import default_team_id

KEY_PREFIX = "ao_"
# last_used_at is for people ("used 3 minutes ago"); writing it on every request would
# turn each read into a write, so it is refreshed at most once per interval.
LAST_USED_RESOLUTION = timedelta(seconds=60)
MAX_GRACE = timedelta(days=7)


class ApiKeyNotFound(NotFound):
    """No live key with that id belongs to the caller."""

    code = "api_key_not_found"


class ApiKeyRefused(AgentOpsError):
    """A known key may not be used (expired, or its owner left its team); says which and when."""

    code = "api_key_refused"
    http_status = 401


class KeyOutranksOwner(InvalidInput):
    """The key would hold a role its owner does not hold in that team."""

    code = "key_outranks_owner"


class BadKeyInput(InvalidInput):
    """A key's team, expiry or grace period is not usable; the message says which."""

    code = "invalid_api_key"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _new_secret() -> tuple[str, str]:
    """Return (the key in clear, its public prefix)."""
    public = f"{KEY_PREFIX}{secrets.token_hex(4)}"
    return f"{public}_{secrets.token_urlsafe(32)}", public


def apikey_create(*, user: Any, name: str, team: Team | None = None, role: str | None = None,
                  expires_at: dt.datetime | None = None) -> tuple[ApiKey, str]:
    """Create a key for ``user`` in ``team`` with ``role``; return it and the clear key.

    No team: the default team. No role: the highest the owner holds there. Raises
    KeyOutranksOwner when ``role`` is above what ``user`` holds in the team now.
    """
    team = team or Team.objects.get(pk=default_team_id())
    held = roles.user_roles(user, team=team)
    role = role or roles.top_role(held)
    if role is None or not roles.role_covered(held, role):
        raise KeyOutranksOwner(
            f"you hold {_roles_text(held)} in team {team.slug}; a key cannot hold "
            f"{role or 'any role'} there", team=team.slug, role=role, held=sorted(held))
    if expires_at is not None and expires_at.tzinfo is None:
        raise BadKeyInput("expires_at needs a time zone, e.g. 2027-01-31T00:00:00Z")
    if expires_at is not None and expires_at <= clock.now():
        raise BadKeyInput("expires_at must be in the future", expires_at=expires_at.isoformat())
    raw, prefix = _new_secret()
    with transaction.atomic():
        key = ApiKey.objects.create(user=user, name=name, team=team, role=role,
                                    expires_at=expires_at, prefix=prefix, key_hash=_hash(raw))
        _audit(user, key, "apikey.create")
    return key, raw


def _roles_text(held: frozenset[str]) -> str:
    return " and ".join(sorted(held)) if held else "no role"


def apikey_verify(*, raw: str) -> Any | None:
    """Return the owner of a live key, carrying the key's scope; None for an unknown key.

    Raises ApiKeyRefused when the key is known but expired or its owner holds no role in
    its team any more. Stamps the key's last use (at most once a minute).
    """
    if not raw.startswith(KEY_PREFIX) or len(raw) > 200:
        return None
    now, digest = clock.now(), _hash(raw)
    key = (ApiKey.objects.select_related("user", "team")
           .filter(Q(key_hash=digest) | Q(previous_hash=digest, previous_until__gt=now),
                   revoked_at__isnull=True).first())
    if key is None or not key.user.is_active:
        return None
    if key.expires_at is not None and key.expires_at <= now:
        raise ApiKeyRefused(f"API key {key.prefix}… expired at {key.expires_at.isoformat()}",
                            expired_at=key.expires_at.isoformat())
    user = key.user
    user.key_scope = roles.KeyScope(key_id=key.pk, team_id=key.team_id, role=key.role)
    if not roles.user_roles(user, team=key.team_id):
        raise ApiKeyRefused(f"API key {key.prefix}…: its owner {user.get_username()} holds no "
                            f"role in team {key.team.slug} any more", team=key.team.slug)
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return user


def apikey_list(*, user: Any) -> QuerySet[ApiKey]:
    """Return the caller's keys, newest first (hashes are never shown)."""
    return (ApiKey.objects.filter(user=user).select_related("team")
            .order_by("-created_at", "-id"))


def apikey_rotate(*, user: Any, key_id: int, grace_s: int = 0) -> tuple[ApiKey, str]:
    """Give one of the caller's live keys a new secret; return it and the clear key.

    Name, team, role and expiry stay. The old secret stops at once, or keeps working for
    ``grace_s`` seconds (at most 7 days) so callers can switch without downtime.
    """
    grace = timedelta(seconds=grace_s)
    if grace_s < 0 or grace > MAX_GRACE:
        raise BadKeyInput(f"grace_s must be between 0 and {int(MAX_GRACE.total_seconds())}",
                          grace_s=grace_s)
    raw, prefix = _new_secret()
    now = clock.now()
    with transaction.atomic():
        key = _own_key(user, key_id)
        if key.revoked_at is not None:
            raise ApiKeyNotFound(f"API key {key_id} is revoked; create a new one",
                                 key_id=key_id)
        key.previous_hash = key.key_hash if grace_s else None
        key.previous_until = now + grace if grace_s else None
        key.key_hash, key.prefix, key.rotated_at = _hash(raw), prefix, now
        key.save(update_fields=["previous_hash", "previous_until", "key_hash", "prefix",
                                "rotated_at"])
        _audit(user, key, "apikey.rotate", grace_s=grace_s)
    return key, raw


def apikey_revoke(*, user: Any, key_id: int) -> ApiKey:
    """Revoke one of the caller's keys; revoking twice keeps the first revocation time."""
    with transaction.atomic():
        key = _own_key(user, key_id)
        if key.revoked_at is None:
            key.revoked_at = clock.now()
            key.previous_hash = key.previous_until = None
            key.save(update_fields=["revoked_at", "previous_hash", "previous_until"])
            _audit(user, key, "apikey.revoke")
    return key


def _own_key(user: Any, key_id: int) -> ApiKey:
    key = (ApiKey.objects.select_for_update().select_related("team")
           .filter(pk=key_id, user=user).first())
    if key is None:
        raise ApiKeyNotFound(f"no API key {key_id} of yours", key_id=key_id)
    return key


def _audit(user: Any, key: ApiKey, action: str, **extra: Any) -> None:
    audit_record(actor=user, action=action, team=key.team,
                 data={"key_id": key.pk, "name": key.name, "prefix": key.prefix,
                       "team": key.team.slug if key.team_id else None, "role": key.role,
                       "expires_at": key.expires_at.isoformat() if key.expires_at else None,
                       **extra})
