"""Plain lanes: a non-streamed model call on the standard library's ``http.client``.

A plain call is one POST of a JSON body and one JSON answer read in full. The SDK's HTTP
stack (httpx, httpcore, h11: request and response models, header normalisation, a pool per
lane, an event-driven HTTP/1.1 parser) cost more CPU than the rest of a model step; here a
lane is one keep-alive ``http.client`` connection, taken from a deque of idle ones (the
most recently used first) and given back after the answer was read.

What stays as the SDK's client had it:

- the headers (the caller's, built once) and the body bytes, sent in one ``send``;
- the idle connection kept ``keepalive_expiry`` seconds; one the server closed while it sat
  idle (readable, or older than that) is dropped before use, as httpcore drops it;
- the TLS context (the HTTP library's default trust store), one for every lane;
- gzip and deflate answers are decoded (the SDK's client asks for them);
- every failure is a typed ModelError: a timeout or no answer (``transport_error``), an
  HTTP error answer (``error_of``, the provider's own mapping), a reply that is not JSON.
  A reply cut midway (the connection closed before its Content-Length or last chunk) is an
  ``IncompleteRead``: a failed call, never a reply.

The timeout is a deadline for the whole exchange (connect, send, the answer read in full):
each socket operation waits at most what is left of ``timeout_s``, so a server that trickles
its answer cannot hold a run slot past it.
"""
from __future__ import annotations

import collections
import http.client
import json
import select
import ssl
import time
import urllib.parse
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from agentops.llm.protocol import ModelError, ServerError
from agentops.llm.provider_errors import transport_error

_READ = 65536
# A garbled answer: a chunk size that is not hex (http.client raises ValueError), a body that
# does not decode as it says it is encoded.
_GARBLED = (http.client.HTTPException, ValueError, zlib.error)


@dataclass(frozen=True)
class PlainReply:
    """An HTTP answer read in full: what a provider's error mapping reads."""

    status_code: int
    headers: Message  # case-insensitive ``get``
    content: bytes

    @property
    def text(self) -> str:
        """The body as text, in the charset its Content-Type names (UTF-8 by default)."""
        charset = self.headers.get_content_charset() or "utf-8"
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")


class PlainLanes:
    """Keep-alive ``http.client`` connections to one URL, at most ``keep`` of them kept idle."""

    def __init__(self, url: str, headers: Mapping[str, str], *, timeout_s: float, keep: int,
                 keepalive_expiry: float | None, tls: ssl.SSLContext | None) -> None:
        """``url``: the endpoint posted to; ``headers``: sent with every call; ``tls``: the
        context for an https URL."""
        parts = urllib.parse.urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = dict(headers)
        self._timeout_s = timeout_s
        self._keep = max(1, keep)
        self._expiry = keepalive_expiry
        self._tls = tls
        if tls is not None:
            tls.set_alpn_protocols(["http/1.1"])
        self._idle: collections.deque[tuple[http.client.HTTPConnection, float]] = collections.deque()

    def post_json(self, content: bytes, error_of: Callable[[Any], ModelError]) -> Any:
        """POST ``content`` and return the decoded JSON reply; raise the ModelError for a
        transport failure (a timeout, no answer, an answer cut or garbled), for an HTTP error
        answer (``error_of(reply)``) or for a reply that is not JSON."""
        reply = self.send(content)
        if reply.status_code >= 400:
            raise error_of(reply) from None
        try:
            return json.loads(reply.content)
        except ValueError:
            raise ServerError("server_error: reply is not JSON") from None

    def send(self, content: bytes) -> PlainReply:
        """POST ``content`` on an idle lane (a new one when none is idle); return the answer,
        read in full and decoded."""
        conn = self._take()
        done = True  # unless the exchange ends well on a connection the server keeps open
        try:
            reply, done = self._exchange(conn, content, time.monotonic() + self._timeout_s)
        except TimeoutError:
            raise transport_error(timed_out=True) from None
        except (OSError, *_GARBLED):
            raise transport_error(timed_out=False) from None
        finally:
            if done:
                conn.close()  # reconnects on its next request
            self._give(conn)
        return reply

    def _take(self) -> http.client.HTTPConnection:
        """Return an idle connection (closed first when no longer fit to send on), else a new
        unconnected one."""
        try:
            conn, since = self._idle.pop()
        except IndexError:
            return self._new()
        if conn.sock is not None and self._stale(conn, since):
            conn.close()
        return conn

    def _stale(self, conn: http.client.HTTPConnection, since: float) -> bool:
        """Tell whether an idle connection is past its keep-alive or closed by the server
        (readable while idle: an end of stream or bytes nobody asked for)."""
        if self._expiry is not None and time.monotonic() - since > self._expiry:
            return True
        poll = select.poll()
        poll.register(conn.sock, select.POLLIN)
        return bool(poll.poll(0))

    def _give(self, conn: http.client.HTTPConnection) -> None:
        if len(self._idle) < self._keep:
            self._idle.append((conn, time.monotonic()))
        else:
            conn.close()

    def _new(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s,
                                               context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)

    def _exchange(self, conn: http.client.HTTPConnection, content: bytes,
                  deadline: float) -> tuple[PlainReply, bool]:
        """Send the POST and read its answer by ``deadline``; return the answer and whether
        the server closes the connection after it."""
        conn.timeout = _left(deadline)  # connecting (when not connected) waits this long
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        conn.request("POST", self._target, content, self._headers)
        sock = conn.sock  # the answer keeps it when the server closes (conn.sock is then None)
        sock.settimeout(_left(deadline))
        response = conn.getresponse()
        try:
            body = _body(response, sock, deadline)
        finally:
            response.close()
        return PlainReply(response.status, response.headers, body), response.will_close


def _body(response: http.client.HTTPResponse, sock: Any, deadline: float) -> bytes:
    """Read the answer's body in full by ``deadline`` and undo its Content-Encoding."""
    chunks = []
    while chunk := response.read1(_READ):
        chunks.append(chunk)
        sock.settimeout(_left(deadline))
    if response.length:  # the connection closed before the Content-Length arrived
        raise http.client.IncompleteRead(b"".join(chunks), response.length)
    return _decoded(b"".join(chunks), response.headers.get("content-encoding"))


def _left(deadline: float) -> float:
    """Return the seconds left before ``deadline``; raise TimeoutError when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """Undo the Content-Encoding the SDK's client asked for (gzip, deflate); others pass."""
    for coding in reversed([c.strip().lower() for c in (encoding or "").split(",")]):
        if coding in ("gzip", "x-gzip"):
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            try:
                body = zlib.decompress(body)
            except zlib.error:  # raw deflate, without the zlib wrapper
                body = zlib.decompress(body, -zlib.MAX_WBITS)
    return body
