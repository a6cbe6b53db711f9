"""Who the client is: REMOTE_ADDR, or an X-Forwarded-For entry vouched for by trusted proxies.

``AGENTOPS_TRUSTED_PROXIES`` says which proxies may speak for the client:

- empty (the default): none. The client is ``REMOTE_ADDR``; X-Forwarded-For is ignored.
- a number N: exactly N proxies stand in front of the app, each appending the address it
  saw. The client is the N-th address from the right of ``X-Forwarded-For + REMOTE_ADDR``.
- CIDRs (``10.0.0.0/8,192.168.1.7``): walk ``X-Forwarded-For + REMOTE_ADDR`` from the right,
  skipping trusted addresses; the first untrusted one is the client.

Entries left of what the trusted proxies appended were written by the client and are never
believed: a client cannot pick its own address by sending ``X-Forwarded-For: 1.2.3.4``.
Login throttling (django-axes) and the /metrics allow-list both use ``client_ip``.
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=16)
def _parse(raw: str) -> int | tuple[Network, ...]:
    """Return the hop count, or the trusted networks, of a setting value."""
    raw = raw.strip()
    if not raw:
        return 0
    if raw.isdigit():
        return int(raw)
    nets = []
    for part in raw.split(","):
        if part.strip():
            try:
                nets.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(f"AGENTOPS_TRUSTED_PROXIES: {part.strip()!r} is neither a hop "
                                 "count nor an address/CIDR") from None
    return tuple(nets)


def trusted_proxies() -> int | tuple[Network, ...]:
    """Return the configured hop count or trusted networks."""
    value = getattr(settings, "AGENTOPS_TRUSTED_PROXIES", "")
    return _parse(str(value) if value is not None else "")


def _chain(request: HttpRequest) -> list[str]:
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    return hops + [request.META.get("REMOTE_ADDR", "")]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def client_ip(request: HttpRequest) -> str:
    """Return the client's address as the trusted proxies report it ("" if unknown)."""
    trust = trusted_proxies()
    remote = request.META.get("REMOTE_ADDR", "")
    if not trust:
        return remote
    chain = _chain(request)
    if isinstance(trust, int):
        # N proxies: REMOTE_ADDR is the last; the client is the entry the first proxy wrote.
        found = chain[-(trust + 1)] if len(chain) > trust else remote
        return found if _is_ip(found) else remote
    for address in reversed(chain):
        if not _is_ip(address):
            return remote
        ip = ipaddress.ip_address(address)
        if not any(ip in net for net in trust):
            return address
    return chain[0] if _is_ip(chain[0]) else remote
