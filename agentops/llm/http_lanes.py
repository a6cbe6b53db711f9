"""HTTP lanes: one single-connection HTTP client per model call in flight, reused.

A worker process keeps hundreds of runs in flight, each waiting on its model at once. One
HTTP client with a pool of hundreds of connections serves them badly: its pool takes one
lock for every request and response and scans every connection each time, so with 250
connections the pool cost more CPU than the rest of the call. A lane holds one connection:
a call takes an idle lane (the most recently used: its connection is kept alive), sends,
and gives it back. Nothing is shared between calls in flight but a deque, whose pop and
append are atomic.

``model_lanes`` picks the lanes of a plain (non-streamed) call: the standard library's
``http.client`` (agentops.llm.plain_lanes), unless the environment routes the URL through a
proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY, as the SDK's client reads them):
then lanes of the SDK's own HTTP client class (``HttpLanes``), which speaks to proxies.

All lanes share one TLS context (building one reads the CA bundle: ~0.1 s of CPU): the
standard library's default one (the system's trust store, or the ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` the environment names), as the SDK's HTTP library builds it on Linux. Plain
lanes import neither the SDK nor its HTTP library: the SDK's client class is asked for only
when a proxy applies.
"""
from __future__ import annotations

import collections
import importlib
import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from agentops.llm.plain_lanes import PlainLanes
from agentops.llm.protocol import ModelError, ServerError
from agentops.llm.provider_errors import transport_error


def model_lanes(client_class: Callable[[], type], url: str, headers: Mapping[str, str], *,
                timeout_s: float, keep: int, keepalive_expiry: float | None
                ) -> PlainLanes | HttpLanes:
    """Return the lanes posting to ``url`` with ``headers``: plain ``http.client`` lanes, or
    lanes of ``client_class()`` (the SDK's default HTTP client class, imported only then)
    when a proxy applies."""
    if _proxied(url):
        return HttpLanes(client_class(), url, headers, timeout_s=timeout_s, keep=keep,
                         keepalive_expiry=keepalive_expiry)
    tls = ssl.create_default_context() if url.startswith("https:") else None
    return PlainLanes(url, headers, timeout_s=timeout_s, keep=keep,
                      keepalive_expiry=keepalive_expiry, tls=tls)


def merged_headers(*layers: Mapping[str, Any]) -> dict[str, str]:
    """Merge header layers as the SDK's client merges its own and a request's: names are
    case-insensitive, a later layer's value replaces an earlier one's; non-str values (the
    SDK's "not given" markers) are left out."""
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update((k.lower(), v) for k, v in layer.items() if isinstance(v, str))
    return merged


def _proxied(url: str) -> bool:
    """Tell whether the environment sends requests to ``url`` through a proxy."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.netloc)


class HttpLanes:
    """Single-connection clients of ``client_class``, at most ``keep`` of them kept idle."""

    def __init__(self, client_class: type, url: str, headers: Mapping[str, str], *,
                 timeout_s: float, keep: int, keepalive_expiry: float | None) -> None:
        """``client_class`` is the SDK's default HTTP client class (e.g. the SDK's
        ``DefaultHttpxClient``), built with its defaults but one connection; ``keep`` is how
        many idle lanes stay open (runs in flight)."""
        self._class = client_class
        self._timeout_s = timeout_s
        self._keep = max(1, keep)
        self._idle: collections.deque[Any] = collections.deque()
        self.lib = http_library(client_class)
        self._url = self.lib.URL(url)
        self._headers = self.lib.Headers(dict(headers))
        self._tls = self.lib.create_ssl_context()
        self._limits = self.lib.Limits(max_connections=1, max_keepalive_connections=1,
                                       keepalive_expiry=keepalive_expiry)

    def post_json(self, content: bytes, error_of: Callable[[Any], ModelError]) -> Any:
        """POST ``content`` and return the decoded JSON reply; raise the ModelError for a
        transport failure (a timeout or none answered), for an HTTP error answer
        (``error_of(response)``, the provider's own mapping) or for a reply that is not JSON."""
        request = self.lib.Request("POST", self._url, headers=self._headers, content=content)
        try:
            response = self.send(request)
        except self.lib.TimeoutException:
            raise transport_error(timed_out=True) from None
        except self.lib.HTTPError:
            raise transport_error(timed_out=False) from None
        if response.status_code >= 400:
            raise error_of(response) from None
        try:
            return json.loads(response.content)
        except ValueError:
            raise ServerError("server_error: reply is not JSON") from None

    def send(self, request: Any) -> Any:
        """Send ``request`` on an idle lane (a new one when none is idle); return the
        response, read in full."""
        try:
            lane = self._idle.pop()
        except IndexError:
            lane = self._class(timeout=self._timeout_s, limits=self._limits, verify=self._tls)
        try:
            return lane.send(request)
        finally:
            if len(self._idle) < self._keep:
                self._idle.append(lane)
            else:
                lane.close()


def http_library(client_class: type) -> ModuleType:
    """Return the HTTP library a client class comes from (httpx, or httpx2 in newer SDKs)."""
    base = next(c for c in client_class.__mro__
                if c.__module__.split(".")[0] not in ("openai", "anthropic"))
    return importlib.import_module(base.__module__.split(".")[0])
