"""Read one HTTP/1.1 answer off a socket: its status line, headers and body, by a deadline.

A plain model call (agentops.llm.plain_lanes) reads one answer per call. The standard
library's ``http.client.HTTPResponse`` parses an answer's headers through the ``email``
package (a feed parser, a policy, a Message): about a tenth of a model step's CPU under
bench/profile_step.py's profiler, for a dozen header lines. Here the head is read into one buffer, split into
lines and kept as a dict by lower-case name; the body is read off the same buffer.

What it reads as ``http.client`` does:

- a status line ``HTTP/1.x NNN reason`` (HTTP/1.0 and 1.1); interim 1xx answers (100
  Continue, 103 Early Hints) are skipped; an empty answer (the server closed first) is
  ``RemoteDisconnected``, any other line a ``BadStatusLine``;
- header lines ``name: value``, folded continuation lines joined to the one before; a
  repeated header keeps its first value (as ``email.message.Message.get``);
- the body: chunked (``Transfer-Encoding`` ending in ``chunked``; chunk extensions and
  trailers read and dropped), else exactly ``Content-Length`` bytes, else up to the
  connection's close; none for 204, 304 and 1xx;
- whether the server closes the connection after it: HTTP/1.1 unless ``Connection:
  close``, HTTP/1.0 only with ``Connection: keep-alive``, and always when the body ran up to
  the close or bytes followed the answer.

Every failure is an ``http.client`` exception or an OSError, as before: a body cut before
its length or last chunk is ``IncompleteRead``; a head over 64 KiB or 100 lines, a header
line without a colon or a bad Content-Length is ``GarbledReply``; a chunk size that is not
hex is ValueError; a read past the deadline is TimeoutError.
"""
from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass

_READ = 65536
_MAX_HEAD = 65536
_MAX_LINES = 100
_NO_BODY = (204, 304)


class GarbledReply(http.client.HTTPException):
    """An answer's head is not HTTP/1.1 as a client may read it."""


class ReplyHeaders(dict[str, str]):
    """An answer's headers by lower-case name; ``get`` takes any case."""

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """Return the (first) value of header ``name``, or ``default``."""
        return super().get(name.lower(), default)

    def content_charset(self) -> str | None:
        """Return the lower-cased charset parameter of the Content-Type, or None."""
        for param in (self.get("content-type") or "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                return value.strip().strip('"').lower() or None
        return None


@dataclass(frozen=True)
class RawReply:
    """An answer read in full, its body as sent (still Content-Encoded)."""

    status: int
    headers: ReplyHeaders
    body: bytes
    will_close: bool


class _Wire:
    """A socket and the bytes read off it but not consumed yet."""

    __slots__ = ("buf", "deadline", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buf = bytearray()

    def more(self) -> bool:
        """Read what has arrived (waiting at most until the deadline); False at its end."""
        self.sock.settimeout(left(self.deadline))
        data = self.sock.recv(_READ)
        self.buf += data
        return bool(data)

    def take(self, size: int) -> bytes:
        out = bytes(self.buf[:size])
        del self.buf[:size]
        return out


def left(deadline: float) -> float:
    """Return the seconds left before ``deadline``; raise TimeoutError when none are."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    return remaining


def reply_read(sock: socket.socket, deadline: float) -> RawReply:
    """Read one answer off ``sock`` by ``deadline`` (the request was sent)."""
    wire = _Wire(sock, deadline)
    while True:
        version, status, headers = _head(wire)
        if not 100 <= status < 200 or status == 101:
            break  # an interim answer: the final one follows
    keep = (headers.get("connection") or "").lower()
    will_close = "close" in keep if version == 11 else "keep-alive" not in keep
    body, to_close = _body(wire, status, headers)
    # Bytes past the answer were never asked for: the connection is not reused.
    return RawReply(status, headers, body, will_close or to_close or bool(wire.buf))


def _head(wire: _Wire) -> tuple[int, int, ReplyHeaders]:
    """Read a status line and its headers; return (version 10/11, status, headers)."""
    lines = _head_lines(wire)
    version, status = _status(lines[0])
    headers = ReplyHeaders()
    name = ""
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and name:  # a folded line continues the header before
            headers[name] = f"{headers[name]} {line.strip()}"
            continue
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise GarbledReply(f"not a header line: {line[:80]!r}")
        headers.setdefault(name, value.strip())
    return version, status, headers


def _head_lines(wire: _Wire) -> list[str]:
    """Read up to the blank line ending a head; return its lines (latin-1), without it."""
    searched = 0
    while (end := wire.buf.find(b"\n\r\n", searched)) < 0 and (
            end := wire.buf.find(b"\n\n", searched)) < 0:
        if len(wire.buf) > _MAX_HEAD:
            break
        searched = max(0, len(wire.buf) - 2)
        if not wire.more():
            if not wire.buf:
                raise http.client.RemoteDisconnected("the server closed without answering")
            raise http.client.IncompleteRead(bytes(wire.buf))
    if not 0 <= end < _MAX_HEAD:
        raise GarbledReply("the answer's head is over 64 KiB")
    head = wire.take(end + 1).decode("latin-1")
    wire.take(2 if wire.buf[:1] == b"\r" else 1)
    lines = [line.rstrip("\r") for line in head.split("\n")][:-1]
    if len(lines) > _MAX_LINES:
        raise GarbledReply(f"the answer has over {_MAX_LINES} header lines")
    return lines


def _status(line: str) -> tuple[int, int]:
    """Return (version, status) of a status line; BadStatusLine when it is not one."""
    proto, _, rest = line.partition(" ")
    code = rest.strip().partition(" ")[0]
    if proto not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise http.client.BadStatusLine(line[:80])
    return (11 if proto == "HTTP/1.1" else 10), int(code)


def _body(wire: _Wire, status: int, headers: ReplyHeaders) -> tuple[bytes, bool]:
    """Read the body; return it and whether it ran up to the connection's close."""
    if status in _NO_BODY:
        return b"", False
    coding = (headers.get("transfer-encoding") or "").lower()
    if coding.rsplit(",", 1)[-1].strip() == "chunked":
        return _chunked(wire)
    length = headers.get("content-length")
    if length is None:
        while wire.more():
            pass
        return wire.take(len(wire.buf)), True
    if not length.strip().isdigit():
        raise GarbledReply(f"bad Content-Length: {length[:40]!r}")
    return _exact(wire, int(length)), False


def _exact(wire: _Wire, size: int) -> bytes:
    """Take ``size`` bytes; IncompleteRead when the connection closes first."""
    while len(wire.buf) < size:
        if not wire.more():
            raise http.client.IncompleteRead(bytes(wire.buf), size - len(wire.buf))
    return wire.take(size)


def _line(wire: _Wire) -> bytes:
    """Take one line (without its end); IncompleteRead when the connection closes first."""
    while (end := wire.buf.find(b"\n")) < 0:
        if len(wire.buf) > _MAX_HEAD:
            raise GarbledReply("a chunk line is over 64 KiB")
        if not wire.more():
            raise http.client.IncompleteRead(bytes(wire.buf))
    return wire.take(end + 1).rstrip(b"\r\n")


def _chunked(wire: _Wire) -> tuple[bytes, bool]:
    """Read a chunked body up to its last chunk and trailers."""
    chunks = []
    while size := int(_line(wire).split(b";", 1)[0].strip(), 16):  # ValueError: not hex
        if size < 0:
            raise GarbledReply(f"a negative chunk size: {size}")
        chunks.append(_exact(wire, size))
        if _line(wire):
            raise GarbledReply("a chunk is longer than its size says")
    while _line(wire):
        pass  # trailers, dropped
    return b"".join(chunks), False
