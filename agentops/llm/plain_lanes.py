"""Plain lanes: a non-streamed model call on a socket of the standard library.

A plain call is one POST of a JSON body and one JSON answer read in full. The SDK's HTTP
stack (httpx, httpcore, h11: request and response models, header normalisation, a pool per
lane, an event-driven HTTP/1.1 parser) cost more CPU than the rest of a model step; here a
lane is one keep-alive connection, taken from a deque of idle ones (the
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

A lane is a socket of its own (not an ``http.client.HTTPConnection``, whose request path
validates every header on every call and sends the head and the body in two packets): the
request line and headers are built once, a call sends them with the Content-Length and the
body in one ``sendall``, and agentops.llm.http_reply reads the answer (not
``http.client.HTTPResponse``, which parses its headers through the ``email`` package).
"""
from __future__ import annotations

import collections
import http.client
import json
import select
import socket
import ssl
import time
import urllib.parse
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentops.llm.http_reply import ReplyHeaders, left, reply_read
from agentops.llm.protocol import ModelError, ServerError
from agentops.llm.provider_errors import transport_error

# A garbled answer: a chunk size that is not hex (ValueError), a head that is not HTTP (an
# http.client exception, agentops.llm.http_reply), a body that
# does not decode as it says it is encoded.
_GARBLED = (http.client.HTTPException, ValueError, zlib.error)


@dataclass(frozen=True)
class PlainReply:
    """An HTTP answer read in full: what a provider's error mapping reads."""

    status_code: int
    headers: ReplyHeaders  # case-insensitive ``get``
    content: bytes

    @property
    def text(self) -> str:
        """The body as text, in the charset its Content-Type names (UTF-8 by default)."""
        charset = self.headers.content_charset() or "utf-8"
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")


class _Lane:
    """One keep-alive connection (None until connected, and again once closed)."""

    __slots__ = ("sock",)

    def __init__(self) -> None:
        self.sock: socket.socket | None = None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class PlainLanes:
    """Keep-alive connections to one URL, at most ``keep`` of them kept idle."""

    def __init__(self, url: str, headers: Mapping[str, str], *, timeout_s: float, keep: int,
                 keepalive_expiry: float | None, tls: ssl.SSLContext | None) -> None:
        """``url``: the endpoint posted to; ``headers``: sent with every call; ``tls``: the
        context for an https URL."""
        parts = urllib.parse.urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._head = _request_head(parts, headers)
        self._timeout_s = timeout_s
        self._keep = max(1, keep)
        self._expiry = keepalive_expiry
        self._tls = tls
        if tls is not None:
            tls.set_alpn_protocols(["http/1.1"])
        self._idle: collections.deque[tuple[_Lane, float]] = collections.deque()

    def post_json(self, content: bytes, error_of: Callable[[Any], ModelError]) -> Any:
        """POST ``content`` and return the decoded JSON reply; raise the ModelError for a
        transport failure (a timeout, no answer, an answer cut or garbled), for an HTTP error
        answer (``error_of(reply)``) or for a reply that is not JSON.

        Once sent, ``content`` is held by no frame of this call while the answer is awaited:
        a model's request body (the whole conversation, as JSON) would otherwise stay in
        memory through the model's latency, beside the messages it was made of, in each of
        the hundreds of calls a worker process keeps waiting."""
        held = [content]
        del content
        reply = self._send(held)
        if reply.status_code >= 400:
            raise error_of(reply) from None
        try:
            return json.loads(reply.content)
        except ValueError:
            raise ServerError("server_error: reply is not JSON") from None

    def _send(self, held: list[bytes]) -> PlainReply:
        """POST the body ``held`` (emptied once it is sent) on an idle lane (a new one when
        none is idle); return the answer, read in full and decoded."""
        lane = self._take()
        done = True  # unless the exchange ends well on a connection the server keeps open
        try:
            reply, done = self._exchange(lane, held, time.monotonic() + self._timeout_s)
        except TimeoutError:
            raise transport_error(timed_out=True) from None
        except (OSError, *_GARBLED):
            raise transport_error(timed_out=False) from None
        finally:
            if done:
                lane.close()  # connects anew on its next call
            self._give(lane)
        return reply

    def _take(self) -> _Lane:
        """Return an idle lane (its connection closed first when no longer fit to send on),
        else a new unconnected one."""
        try:
            lane, since = self._idle.pop()
        except IndexError:
            return _Lane()
        if lane.sock is not None and self._stale(lane.sock, since):
            lane.close()
        return lane

    def _stale(self, sock: socket.socket, since: float) -> bool:
        """Tell whether an idle connection is past its keep-alive or closed by the server
        (readable while idle: an end of stream or bytes nobody asked for)."""
        if self._expiry is not None and time.monotonic() - since > self._expiry:
            return True
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        return bool(poll.poll(0))

    def _give(self, lane: _Lane) -> None:
        if len(self._idle) < self._keep:
            self._idle.append((lane, time.monotonic()))
        else:
            lane.close()

    def _connect(self, timeout_s: float) -> socket.socket:
        sock = socket.create_connection((self._host, self._port), timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                return self._tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _exchange(self, lane: _Lane, held: list[bytes], deadline: float
                  ) -> tuple[PlainReply, bool]:
        """Send the POST (head and body ``held`` in one send, then let go of the body) and
        read its answer by ``deadline``; return the answer and whether the server closes the
        connection after it."""
        if lane.sock is None:
            lane.sock = self._connect(left(deadline))
        sock = lane.sock
        sock.settimeout(left(deadline))
        content = held.pop()
        sock.sendall(b"%s%d\r\n\r\n%s" % (self._head, len(content), content))
        del content
        _answer_wait(sock, deadline)
        raw = reply_read(sock, deadline)
        body = _decoded(raw.body, raw.headers.get("content-encoding"))
        return PlainReply(raw.status, raw.headers, body), raw.will_close


def _request_head(parts: urllib.parse.SplitResult, headers: Mapping[str, str]) -> bytes:
    """Return the request line and headers of every call, up to the Content-Length's value."""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}{f':{parts.port}' if parts.port else ''}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
    if any(c in line for line in lines for c in "\r\n\0"):
        raise ValueError("a header name or value holds a line break")
    head = "\r\n".join(lines + ["Content-Length: "])
    return head.encode("latin-1")


def _answer_wait(sock: socket.socket, deadline: float) -> None:
    """Wait until the answer's first bytes arrive (or the connection ends) by ``deadline``.

    A reply takes the model's whole latency; a read begun before it arrives holds its
    receive buffer (``recv`` allocates it before it blocks: 64 KiB) for all that time, in
    each of the hundreds of calls a worker process keeps waiting. Begun once bytes are
    there, it lives only while they are read. (TLS: the socket's own readiness; bytes may
    be a ticket, not yet the answer, and the read then waits with the usual timeout.)
    """
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return  # decrypted bytes already wait in the TLS layer, out of poll's sight
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    while not poll.poll(left(deadline) * 1000):
        pass  # woken early (EINTR is retried by poll itself): wait out what is left


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
