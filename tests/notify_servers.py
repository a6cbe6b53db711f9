"""Real receivers for notification tests: an SMTP server (aiosmtpd) and an HTTP receiver.

Nothing of the sending path is mocked: the sender talks SMTP and HTTP to these over
localhost, and the tests read what arrived. Both can hold a message mid-conversation so a
chaos test can kill the sender before or after the wire send.
"""
from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


def free_port() -> int:
    """Return a TCP port free on localhost right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MailBox:
    """The aiosmtpd handler: keeps every message it accepted, in order."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.connected = threading.Event()   # a client reached RCPT
        self.hold_rcpt: threading.Event | None = None   # block before the message is sent
        self.hold_reply: threading.Event | None = None  # block after it arrived, before 250
        self.arrived = threading.Event()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        """Accept the recipient (optionally only once ``hold_rcpt`` is released)."""
        self.connected.set()
        if self.hold_rcpt is not None:
            await _wait(self.hold_rcpt)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        """Keep the message; with ``hold_reply`` set, answer only once it is released."""
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        self.arrived.set()
        if self.hold_reply is not None:
            await _wait(self.hold_reply)
        return "250 Message accepted for delivery"


async def _wait(event: threading.Event) -> None:
    import asyncio

    await asyncio.get_running_loop().run_in_executor(None, event.wait)


class Receiver(ThreadingHTTPServer):
    """An HTTP server keeping every POST; it dedupes by the Idempotency-Key header."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", free_port()), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.effective: dict[str, dict[str, Any]] = {}
        self.statuses: list[int] = []   # answers to give first, then 200
        self.hold_reply: threading.Event | None = None
        self.arrived = threading.Event()

    @property
    def url(self) -> str:
        """Return the URL to post to."""
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        srv: Receiver = self.server  # type: ignore[assignment]
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        req = {"headers": self.headers, "raw": raw, "json": json.loads(raw)}
        srv.requests.append(req)
        srv.effective.setdefault(self.headers.get("Idempotency-Key", ""), req)
        srv.arrived.set()
        if srv.hold_reply is not None:
            srv.hold_reply.wait(30)
        status = srv.statuses.pop(0) if srv.statuses else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        """Stay quiet."""


@contextmanager
def smtp_running() -> Iterator[tuple[MailBox, int]]:
    """Run a real SMTP server on localhost for the block: (its mailbox, its port)."""
    box = MailBox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        for ev in (box.hold_rcpt, box.hold_reply):
            if ev is not None:
                ev.set()
        controller.stop()


@contextmanager
def receiver_running() -> Iterator[Receiver]:
    """Run a real HTTP receiver on localhost for the block (chat and webhook channels)."""
    srv = Receiver()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        if srv.hold_reply is not None:
            srv.hold_reply.set()
        srv.shutdown()
        srv.server_close()


class SyslogListener:
    """A real syslog receiver on localhost: UDP datagrams, or TCP with octet counting."""

    def __init__(self, proto: str) -> None:
        self.proto = proto
        kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
        self.sock = socket.socket(socket.AF_INET, kind)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.messages: list[bytes] = []
        self.stopped = threading.Event()
        if proto == "tcp":
            self.sock.listen()
        self.sock.settimeout(0.2)

    @property
    def url(self) -> str:
        """Return the AGENTOPS_AUDIT_SINK address of this listener."""
        return f"syslog+{self.proto}://127.0.0.1:{self.port}"

    def serve(self) -> None:
        """Keep what arrives until stopped."""
        while not self.stopped.is_set():
            try:
                if self.proto == "udp":
                    self.messages.append(self.sock.recv(65535))
                else:
                    conn, _ = self.sock.accept()
                    threading.Thread(target=self._read_frames, args=(conn,), daemon=True).start()
            except TimeoutError:
                continue

    def _read_frames(self, conn: socket.socket) -> None:
        """Read RFC 6587 octet-counted frames: "<length> <message>"."""
        buf = b""
        with conn:
            conn.settimeout(5)
            while True:
                try:
                    chunk = conn.recv(65536)
                except (TimeoutError, OSError):
                    return
                if not chunk:
                    return
                buf += chunk
                while b" " in buf:
                    size, _, rest = buf.partition(b" ")
                    if len(rest) < int(size):
                        break
                    self.messages.append(rest[:int(size)])
                    buf = rest[int(size):]


@contextmanager
def syslog_running(proto: str) -> Iterator[SyslogListener]:
    """Run a real syslog listener (``udp`` or ``tcp``) on localhost for the block."""
    listener = SyslogListener(proto)
    thread = threading.Thread(target=listener.serve, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        listener.stopped.set()
        thread.join(2)
        listener.sock.close()
