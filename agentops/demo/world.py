"""The demo's sandbox outside world: orders, side effects with their keys, injected faults.

Faults are chosen per run through the run's input, ``{"faults": {NAME: FAULT}}`` (see
docs/demo.md): NAME is a tool name, or ``tool:qualifier`` (``query_sales:eu``), or ``model``;
FAULT is ``kind`` or ``kind:argument`` (``rate_limit:3600``). Tools look the faults up by
``ctx.run_id``, so a fault holds across workers and restarts. Models are imported lazily so
this module (and the demo agents) import before the demo app is installed.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count

from agentops.demo.models import WorldEffect
from agentops.tools import ToolContext
from ledger.errors import (
    ToolApiChanged,
    ToolBusinessRejection,
    ToolCredentialsRefused,
    ToolNotFound,
    ToolPermissionDenied,
    ToolRateLimited,
    ToolRequestInvalid,
    ToolTimeout,
    ToolTransient,
)
from runs.models import Run

ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {"item": "trail shoes", "amount": 45, "days_since_delivery": 6},
    "A-2002": {"item": "road bike helmet", "amount": 250, "days_since_delivery": 3},
    "A-3003": {"item": "rain jacket", "amount": 80, "days_since_delivery": 12},
    "A-4004": {"item": "camping stove", "amount": 60, "days_since_delivery": 45},
    "A-5005": {"item": "wool socks (3 pairs)", "amount": 24, "days_since_delivery": 2},
    "A-6006": {"item": "tent, 2 persons", "amount": 320, "days_since_delivery": 9},
    "A-7007": {"item": "kayak paddle", "amount": 180, "days_since_delivery": 4},
    "A-8008": {"item": "climbing harness", "amount": 140, "days_since_delivery": 5},
}
REGIONS = ("na", "eu", "apac", "latam")


def order_get(order_id: str) -> dict[str, Any]:
    """Return the order ``order_id``; unknown ids get a stable made-up order."""
    known = ORDERS.get(order_id)
    n = int(hashlib.sha256(order_id.encode()).hexdigest()[:8], 16)
    base = known or {"item": "gift card", "amount": 20 + n % 90, "days_since_delivery": n % 40}
    slug = "".join(ch for ch in order_id.lower() if ch.isalnum()) or "customer"
    return {"order_id": order_id, "customer": f"Customer {order_id}",
            "email": f"{slug}@example.com", **base}


def region_sales(region: str) -> dict[str, Any]:
    """Return a region's (made-up, stable) quarterly sales."""
    n = int(hashlib.sha256(region.encode()).hexdigest()[:8], 16)
    return {"region": region, "total": 100_000 + n % 900_000, "orders": 500 + n % 4_000}


def document_text(doc_id: str) -> str:
    """Return the text of a (made-up, stable) invoice document."""
    n = int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16)
    return f"INVOICE {doc_id.upper()} | vendor: Vendor {n % 37} | total: {n % 5000}.{n % 100:02d} EUR"


def faults_for(run_id: str) -> dict[str, str]:
    """Return the faults injected into run ``run_id`` (its input's ``faults``)."""
    data = Run.objects.filter(pk=run_id).values_list("input", flat=True).first() or {}
    faults = data.get("faults") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in faults.items()} if isinstance(faults, dict) else {}


def fault_of(faults: dict[str, str], name: str) -> tuple[str, str]:
    """Return (kind, argument) of the fault injected at ``name``, or ("", "")."""
    kind, _, arg = faults.get(name, "").partition(":")
    return kind, arg


_PERMANENT = {
    "permission": lambda name, arg: ToolPermissionDenied(f"{name}: this account may not read "
                                                         "that data"),
    "not_found": lambda name, arg: ToolNotFound(f"{name}: no such record"),
    "reject": lambda name, arg: ToolBusinessRejection(f"{name}: refused: "
                                                      f"{arg or 'outside the policy'}"),
    "credentials": lambda name, arg: ToolCredentialsRefused(f"{name}: HTTP 401, the API key "
                                                            "was refused"),
    "bad_request": lambda name, arg: ToolRequestInvalid(f"{name}: HTTP 422, "
                                                        f"{arg or 'the request is invalid'}"),
    "api_changed": lambda name, arg: ToolApiChanged(f"{name}: the answer has no "
                                                    f"{arg or 'expected'} field"),
}


def fault_before(ctx: ToolContext, name: str) -> None:
    """Raise the fault injected at ``name`` that strikes before the tool acts."""
    kind, arg = fault_of(faults_for(ctx.run_id), name)
    if kind in _PERMANENT:
        raise _PERMANENT[kind](name, arg)
    if kind == "rate_limit" and ctx.attempt == 1:
        delay = float(arg or 30)
        raise ToolRateLimited(f"{name}: rate limited, retry in {delay:g}s", next_retry_delay=delay)
    if kind == "transient" and ctx.attempt <= int(arg or 1):
        raise ToolTransient(f"{name}: backend answered 503")
    if kind == "slow":  # a slow backend: the demo's live batch takes minutes, not seconds
        time.sleep(float(arg or 1))


def fault_after(ctx: ToolContext, name: str) -> None:
    """Raise a timeout after the effect happened when ``timeout_after*`` is injected at ``name``."""
    kind, _ = fault_of(faults_for(ctx.run_id), name)
    if kind.startswith("timeout_after") and ctx.attempt == 1:
        raise ToolTimeout(f"{name}: no answer in time (the effect may have happened)")


def effect_record(*, kind: str, key: str, run_id: str, data: dict[str, Any],
                  idempotent: bool) -> tuple[Any, bool]:
    """Record a side effect; an idempotent one already recorded is returned, not repeated."""
    if idempotent:
        found = WorldEffect.objects.filter(kind=kind, key=key, idempotent=True).first()
        if found is not None:
            return found, False
        try:
            with transaction.atomic():
                return WorldEffect.objects.create(kind=kind, key=key, run_id=run_id, data=data,
                                                  idempotent=True), True
        except IntegrityError:  # a concurrent call with the same key got there first
            return WorldEffect.objects.get(kind=kind, key=key, idempotent=True), False
    return WorldEffect.objects.create(kind=kind, key=key, run_id=run_id, data=data), True


def effect_find(*, kind: str, key: str) -> Any:
    """Return the effect recorded under (kind, key), or None."""
    return WorldEffect.objects.filter(kind=kind, key=key).first()


def effects_duplicated(*, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Return every (kind, key) recorded more than once: a side effect that happened twice.

    With ``run_ids``, only effects of those runs (a team member's runs) are counted.
    """
    qs = WorldEffect.objects.all() if run_ids is None else \
        WorldEffect.objects.filter(run_id__in=run_ids)
    return list(qs.values("kind", "key").annotate(n=Count("id"))
                .filter(n__gt=1).order_by("kind", "key"))


def model_outage_hit(key: str, calls: int) -> bool:
    """Return True (and count it) while the demo model outage for ``key`` has calls left."""
    used = WorldEffect.objects.filter(kind="model.outage", key__startswith=f"{key}#").count()
    if used >= calls:
        return False
    effect_record(kind="model.outage", key=f"{key}#{used + 1}", run_id="", data={},
                  idempotent=True)
    return True
