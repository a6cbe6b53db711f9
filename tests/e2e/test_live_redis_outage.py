"""Websockets while Redis is down, and the first one after it returns.

A real ``redis-server`` on a free loopback port (started, stopped and started again by the
test), a real daphne using it as its channel layer, and websocket handshakes sent by hand on
a socket (a signed-in operator's session cookie). While Redis is down the upgrade is refused
(HTTP 403, no traceback, one log line for the outage) and one already open is closed with
4503; once Redis is back the very next websocket is accepted and receives a message
published through Redis.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from tests.e2e.test_cold_start import _free_port
from tests.e2e.test_connection_budget import daphne_server

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not shutil.which("redis-server"), reason="no redis-server")]

RETRIES = 5


class RedisServer:
    """A throw-away redis-server on a loopback port, without persistence."""

    def __init__(self, port: int) -> None:
        self.port, self.proc = port, None

    @property
    def url(self) -> str:
        """Return its redis:// URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers."""
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        """Stop it (its clients' connections break)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own, stopped at the end."""
    server = RedisServer(_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _session_cookie() -> str:
    from django.test import Client

    from approvals.roles import OPERATOR
    from tests.console_factories import make_user

    client = Client()
    client.force_login(make_user("live-viewer", OPERATOR))
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _handshake(base: str, cookie: str, path: str = "/ws/queue/") -> tuple[socket.socket, str]:
    """Send a websocket upgrade; return the socket and the response's status line."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  f"Sec-WebSocket-Version: 13\r\nOrigin: {base}\r\n"
                  f"Cookie: {settings.SESSION_COOKIE_NAME}={cookie}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head.split(b"\r\n", 1)[0].decode()


def _text_frame(sock: socket.socket) -> str:
    """Read one unfragmented text frame the server sent (unmasked, short)."""
    first, size = sock.recv(2)
    assert first & 0x0F == 0x1, f"not a text frame: {first:#x}"
    if size == 126:
        size = int.from_bytes(sock.recv(2), "big")
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return data.decode()


def _close_code(sock: socket.socket) -> int:
    """Read the close frame the server sends; return its code."""
    first, size = sock.recv(2)
    assert first & 0x0F == 0x8, f"not a close frame: {first:#x}"
    return int.from_bytes(sock.recv(size)[:2], "big")


def _publish(url: str) -> None:
    from channels_redis.core import RedisChannelLayer

    from runs.live import QUEUE_GROUP

    layer = RedisChannelLayer(hosts=[url])
    async_to_sync(layer.group_send)(QUEUE_GROUP, {
        "type": "live.message", "kind": "run.changed", "run_id": "r-1", "text": "back"})


def test_websocket_without_redis_is_refused_then_works_again(tmp_path: Path, redis_server):
    cookie = _session_cookie()
    with daphne_server(tmp_path, REDIS_URL=redis_server.url, LOG_LEVEL="WARNING",
                       SECRET_KEY=settings.SECRET_KEY) as (_, base):
        open_ws, status = _handshake(base, cookie)
        assert " 101 " in status, status  # Redis up: live

        redis_server.stop()
        closed = _close_code(open_ws)  # the websocket open when Redis went away
        open_ws.close()
        statuses = []
        for _ in range(RETRIES):
            sock, status = _handshake(base, cookie)
            statuses.append(status)
            sock.close()
        redis_server.start()

        sock, status = _handshake(base, cookie)
        try:
            assert " 101 " in status, status  # the first websocket after Redis returned
            time.sleep(0.5)  # its group membership is in Redis once accepted
            _publish(redis_server.url)
            message = json.loads(_text_frame(sock))
        finally:
            sock.close()
    log = (tmp_path / "daphne.log").read_text()
    assert all(" 403 " in s for s in statuses), statuses  # refused, not a 500
    assert "Traceback" not in log, log
    assert log.count("live updates are off") == 1, log
    assert log.count("live updates are back") == 1, log
    assert message == {"type": "run.changed", "run_id": "r-1", "text": "back"}
    assert closed == 4503
