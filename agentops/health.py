"""Health endpoints: /healthz (the process is up), /readyz (it can serve), /metrics."""
from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from agentops.doctor import readiness_checks
from agentops.observability.collectors import DatabaseCollector
from agentops.observability.metrics import metrics_exposition
from agentops.proxies import client_ip

DEFAULT_METRICS_ALLOW = ("127.0.0.1", "::1")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Answer 200 while the process can answer at all; touches nothing else."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database answers, migrations are applied and a worker is alive."""
    checks = readiness_checks()
    ready = all(c.ok for c in checks)
    body = {
        "status": "ready" if ready else "unready",
        "checks": {c.name: {"ok": c.ok, "message": c.message} for c in checks},
        "reasons": [c.message for c in checks if not c.ok],
    }
    return JsonResponse(body, status=200 if ready else 503)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Serve Prometheus metrics to an allowed address or a caller with the bearer token."""
    if not metrics_allowed(request):
        return HttpResponse("metrics are not available to this client\n", status=403,
                            content_type="text/plain")
    include_db = bool(getattr(settings, "AGENTOPS_METRICS_DB_GAUGES", True))
    body = metrics_exposition(extra=[DatabaseCollector()] if include_db else [])
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def metrics_allowed(request: HttpRequest) -> bool:
    """Return True when the bearer token matches or the client address is in the allow list."""
    token = getattr(settings, "AGENTOPS_METRICS_TOKEN", "")
    if token:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        given_bytes, token_bytes = given.strip().encode(), token.encode()
        if scheme.lower() == "bearer" and hmac.compare_digest(given_bytes, token_bytes):
            return True
    allow = getattr(settings, "AGENTOPS_METRICS_ALLOW", DEFAULT_METRICS_ALLOW)
    return _address_in(client_ip(request), allow)


def _address_in(address: str, networks: list[str] | tuple[str, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in networks:
        try:
            if ip in ipaddress.ip_network(entry.strip(), strict=False):
                return True
        except ValueError:
            continue  # a malformed entry is reported by the doctor, never matches here
    return False
