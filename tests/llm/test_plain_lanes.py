"""PlainLanes (agentops.llm.plain_lanes) against a real local HTTP server speaking raw bytes.

The server reads each request in full, then writes what the test scripted, byte for byte:
so a reply can be cut midway, trickled past the deadline, or close the connection.
"""
from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import socket
import socketserver
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import openai
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentops.llm.http_lanes import HttpLanes, model_lanes
from agentops.llm.plain_lanes import PlainLanes
from agentops.llm.protocol import ModelError, ModelTimeout, RateLimited, ServerError
from agentops.llm.provider_errors import status_error

Script = Callable[[socket.socket], bool]  # writes an answer; False: close the connection


@dataclass
class RawServer:
    """A keep-alive HTTP/1.1 server whose answers are scripted as raw bytes."""

    url: str = ""
    scripts: list[Script] = field(default_factory=list)
    requests: list[tuple[int, bytes, bytes]] = field(default_factory=list)  # (peer port, head, body)
    tls: ssl.SSLContext | None = None  # set: connections are accepted over TLS

    def lanes(self, *, timeout_s: float = 5, keep: int = 4, expiry: float | None = 5.0) -> PlainLanes:
        """Return lanes posting to this server."""
        return PlainLanes(self.url, {"content-type": "application/json", "x-test": "1"},
                          timeout_s=timeout_s, keep=keep, keepalive_expiry=expiry, tls=None)


def _serve(state: RawServer, conn: socket.socket, peer: int) -> None:
    reader = conn.makefile("rb")
    while True:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = reader.readline()
            if not line:
                return
            head += line
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                      if h.lower().startswith(b"content-length:"))
        state.requests.append((peer, head, reader.read(length)))
        if not state.scripts.pop(0)(conn):
            return


@pytest.fixture
def raw() -> Iterator[RawServer]:
    """Serve scripted raw answers on a free 127.0.0.1 port."""
    state = RawServer()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                _serve(state, self.request, self.client_address[1])
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first

    class Server(socketserver.ThreadingTCPServer):
        def get_request(self) -> tuple[socket.socket, object]:
            conn, peer = super().get_request()
            return (state.tls.wrap_socket(conn, server_side=True) if state.tls else conn), peer

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions?x=1"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


def answer(body: bytes, *, status: str = "200 OK", headers: str = "", length: int | None = None,
           keep: bool = True, pause_s: float = 0.0) -> Script:
    """Script an answer of ``body`` (its Content-Length ``length``, default the true one)."""
    def script(conn: socket.socket) -> bool:
        time.sleep(pause_s)
        size = len(body) if length is None else length
        conn.sendall(f"HTTP/1.1 {status}\r\ncontent-length: {size}\r\n{headers}".encode()
                     + (b"" if keep else b"connection: close\r\n") + b"\r\n" + body)
        return keep
    return script


def error_of(reply) -> ModelError:
    """The providers' mapping of an HTTP error answer, as the clients pass it."""
    return status_error(reply.status_code, "", response=reply, overflow=False)


def test_posts_the_body_and_headers_and_reads_the_json(raw: RawServer) -> None:
    raw.scripts.append(answer(b'{"ok": true}'))
    assert raw.lanes().post_json(b'{"q": 1}', error_of) == {"ok": True}
    _, head, body = raw.requests[0]
    assert head.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n")
    assert b"x-test: 1\r\n" in head and b"content-length: 8\r\n" in head.lower()
    assert f"Host: {raw.url.split('/')[2]}\r\n".encode() in head
    assert body == b'{"q": 1}'


def test_a_header_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        PlainLanes("http://127.0.0.1:9/v1", {"x-evil": "1\r\nx-more: 2"}, timeout_s=1, keep=1,
                   keepalive_expiry=None, tls=None)


def test_calls_one_after_another_reuse_one_connection(raw: RawServer) -> None:
    raw.scripts += [answer(b"{}") for _ in range(3)]
    lanes = raw.lanes()
    for _ in range(3):
        assert lanes.post_json(b"{}", error_of) == {}
    assert len({peer for peer, _, _ in raw.requests}) == 1


def test_a_connection_the_server_closes_is_not_reused(raw: RawServer) -> None:
    """Connection: close, or the server closing the idle connection: the next call connects anew."""
    def close_quietly(conn: socket.socket) -> bool:
        answer(b"{}")(conn)  # says keep-alive, then closes
        return False
    raw.scripts += [answer(b"{}", keep=False), close_quietly, answer(b"{}")]
    lanes = raw.lanes()
    assert lanes.post_json(b"{}", error_of) == {}
    assert lanes.post_json(b"{}", error_of) == {}
    time.sleep(0.1)  # the server's close arrives while the connection sits idle
    assert lanes.post_json(b"{}", error_of) == {}
    assert len({peer for peer, _, _ in raw.requests}) == 3


def test_an_idle_connection_past_its_keep_alive_is_replaced(raw: RawServer) -> None:
    raw.scripts += [answer(b"{}"), answer(b"{}")]
    lanes = raw.lanes(expiry=0.05)
    lanes.post_json(b"{}", error_of)
    time.sleep(0.1)
    lanes.post_json(b"{}", error_of)
    assert len({peer for peer, _, _ in raw.requests}) == 2


def test_a_reply_cut_midway_is_an_error_not_a_reply(raw: RawServer) -> None:
    raw.scripts += [answer(b'{"choices": [', length=200, keep=False), answer(b'{"ok": 1}')]
    lanes = raw.lanes()
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        lanes.post_json(b"{}", error_of)
    assert lanes.post_json(b"{}", error_of) == {"ok": 1}  # the lane connects anew


def test_a_chunked_reply_cut_midway_is_an_error(raw: RawServer) -> None:
    def cut(conn: socket.socket) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"10\r\n{\"choices\": [1,\r\n")
        return False
    raw.scripts.append(cut)
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        raw.lanes().post_json(b"{}", error_of)


def test_a_chunked_reply_in_full_is_read(raw: RawServer) -> None:
    def chunked(conn: socket.socket) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n")
        return True
    raw.scripts += [chunked, answer(b"{}")]
    lanes = raw.lanes()
    assert lanes.post_json(b"{}", error_of) == {"a": 1}
    assert lanes.post_json(b"{}", error_of) == {}
    assert len({peer for peer, _, _ in raw.requests}) == 1


def test_a_slow_reply_past_the_timeout_is_a_model_timeout(raw: RawServer) -> None:
    raw.scripts.append(answer(b"{}", pause_s=1.5))
    started = time.monotonic()
    with pytest.raises(ModelTimeout, match="^timeout: no answer in time$"):
        raw.lanes(timeout_s=0.4).post_json(b"{}", error_of)
    assert time.monotonic() - started < 1.0


def test_a_trickled_reply_cannot_outlast_the_deadline(raw: RawServer) -> None:
    """Each byte comes before a per-read timeout would fire; the whole reply does not come
    within the deadline."""
    def trickle(conn: socket.socket) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n")
        for _ in range(40):
            time.sleep(0.05)
            conn.sendall(b" ")
        return True
    raw.scripts.append(trickle)
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        raw.lanes(timeout_s=0.5).post_json(b"{}", error_of)
    assert time.monotonic() - started < 1.2


def test_connection_refused_is_a_server_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lanes = PlainLanes(f"http://127.0.0.1:{port}/v1", {}, timeout_s=2, keep=1,
                       keepalive_expiry=None, tls=None)
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        lanes.post_json(b"{}", error_of)


def test_an_error_answer_goes_to_the_providers_mapping(raw: RawServer) -> None:
    raw.scripts.append(answer(b'{"error": {}}', status="429 Too Many Requests",
                              headers="Retry-After: 7\r\ncontent-type: text/plain; charset=latin-1\r\n"))
    with pytest.raises(RateLimited) as caught:
        raw.lanes().post_json(b"{}", error_of)
    assert caught.value.retry_after == 7 and caught.value.status_code == 429


def test_a_reply_that_is_not_json_is_a_server_error(raw: RawServer) -> None:
    raw.scripts.append(answer(b"<html>"))
    with pytest.raises(ServerError, match="^server_error: reply is not JSON$"):
        raw.lanes().post_json(b"{}", error_of)


@pytest.mark.parametrize(("coding", "encode"), [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, no zlib wrapper
])
def test_compressed_replies_are_decoded(raw: RawServer, coding: str, encode) -> None:
    body = json.dumps({"text": "é" * 50}).encode()
    raw.scripts.append(answer(encode(body), headers=f"content-encoding: {coding}\r\n"))
    assert raw.lanes().post_json(b"{}", error_of) == {"text": "é" * 50}


def test_a_garbled_compressed_reply_is_a_server_error(raw: RawServer) -> None:
    raw.scripts.append(answer(b"not gzip", headers="content-encoding: gzip\r\n"))
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        raw.lanes().post_json(b"{}", error_of)


def test_keep_bounds_the_idle_connections(raw: RawServer) -> None:
    """Calls in flight at once each get a connection; only ``keep`` stay open afterwards."""
    raw.scripts += [answer(b"{}", pause_s=0.2) for _ in range(4)]
    lanes = raw.lanes(keep=2)
    threads = [threading.Thread(target=lanes.post_json, args=(b"{}", error_of)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({peer for peer, _, _ in raw.requests}) == 4
    assert len(lanes._idle) == 2


def test_a_proxied_url_goes_out_on_the_sdk_clients_lanes(raw: RawServer, monkeypatch) -> None:
    """With HTTP_PROXY set (the raw server plays the proxy) the call goes out on the SDK's HTTP
    client, which sends it to the proxy; NO_PROXY naming the host sends it plainly again."""
    raw.scripts += [answer(b'{"via": "proxy"}'), answer(b'{"via": "plain"}')]
    proxy = raw.url.split("/v1")[0]
    target = "http://model.invalid:8000/v1/chat/completions"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    lanes = model_lanes(lambda: openai.DefaultHttpxClient, target, {"x-test": "1"}, timeout_s=5, keep=1,
                        keepalive_expiry=5.0)
    assert isinstance(lanes, HttpLanes) and lanes.post_json(b"{}", error_of) == {"via": "proxy"}
    assert raw.requests[0][1].startswith(f"POST {target} HTTP/1.1".encode())
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    plain = model_lanes(lambda: openai.DefaultHttpxClient, raw.url, {}, timeout_s=5, keep=1,
                        keepalive_expiry=5.0)
    assert isinstance(plain, PlainLanes) and plain.post_json(b"{}", error_of) == {"via": "plain"}


def _self_signed(tmp_path) -> tuple[str, str]:
    """Write a certificate for 127.0.0.1 and its key; return their paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_https_goes_out_over_tls_and_checks_the_certificate(raw: RawServer, tmp_path) -> None:
    """An https URL is spoken over TLS with the context given: a certificate it trusts is
    answered on one kept-alive connection; one it does not trust is a failed call."""
    cert, key = _self_signed(tmp_path)
    raw.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    raw.tls.load_cert_chain(cert, key)
    raw.scripts += [answer(b'{"tls": 1}'), answer(b'{"tls": 2}')]
    url = raw.url.replace("http:", "https:")
    trusting = ssl.create_default_context(cafile=cert)
    lanes = PlainLanes(url, {}, timeout_s=5, keep=1, keepalive_expiry=5.0, tls=trusting)
    assert lanes.post_json(b"{}", error_of) == {"tls": 1}
    assert lanes.post_json(b"{}", error_of) == {"tls": 2}
    assert len({peer for peer, _, _ in raw.requests}) == 1
    strangers = PlainLanes(url, {}, timeout_s=5, keep=1, keepalive_expiry=5.0,
                           tls=ssl.create_default_context())
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        strangers.post_json(b"{}", error_of)


def _held_while_waiting(raw: RawServer, body: Callable[[], bytes]) -> int:
    """Post ``body()`` (made while allocations are traced) to an answer that comes late;
    return the bytes the call holds (the server's copy of the body left out) while it waits."""
    import tracemalloc

    asked, go = threading.Event(), threading.Event()

    def late(conn: socket.socket) -> bool:
        asked.set()
        go.wait(5)
        return answer(b'{"ok": 1}')(conn)

    raw.scripts.append(late)
    lanes, got = raw.lanes(), []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        caller = threading.Thread(target=lambda: got.append(lanes.post_json(body(), error_of)))
        caller.start()
        assert asked.wait(5)
        raw.requests.clear()  # the server's copy of the body
        time.sleep(0.1)  # the caller is waiting on the answer now
        waiting = tracemalloc.get_traced_memory()[0] - before
    finally:
        go.set()
        caller.join(5)
        tracemalloc.stop()
    assert got == [{"ok": 1}]
    return waiting


def test_a_call_waiting_on_its_answer_holds_no_read_buffer(raw: RawServer) -> None:
    """Hundreds of calls wait on their model at once in a worker process: none of them holds
    a read's buffer (``recv`` allocates 64 KiB before it blocks) until the answer's bytes come."""
    waiting = _held_while_waiting(raw, lambda: b"{}")
    assert waiting < 32 << 10, waiting


def test_a_call_waiting_on_its_answer_no_longer_holds_its_request_body(raw: RawServer) -> None:
    """The request body (a model's whole conversation, as JSON) is let go of once sent: the
    hundreds of calls a worker process keeps waiting do not each hold a copy of theirs."""
    size = 4 << 20
    waiting = _held_while_waiting(raw, lambda: json.dumps({"q": "x" * size}).encode())
    assert waiting < size // 4, waiting


def test_a_bad_status_line_is_a_server_error_and_the_lane_connects_anew(raw: RawServer) -> None:
    def garbled(conn: socket.socket) -> bool:
        conn.sendall(b"HTTP/9 200 OK\r\ncontent-length: 2\r\n\r\n{}")
        return True
    raw.scripts += [garbled, answer(b'{"ok": 1}')]
    lanes = raw.lanes()
    with pytest.raises(ServerError, match="^server_error: connection failed$"):
        lanes.post_json(b"{}", error_of)
    assert lanes.post_json(b"{}", error_of) == {"ok": 1}
    assert len({peer for peer, _, _ in raw.requests}) == 2


def test_an_error_answer_without_length_is_read_up_to_the_close(raw: RawServer) -> None:
    def no_length(conn: socket.socket) -> bool:
        conn.sendall(b"HTTP/1.1 503 Busy\r\ncontent-type: text/plain; charset=latin-1\r\n"
                     b"connection: close\r\n\r\nbusy \xe9")
        return False
    raw.scripts.append(no_length)
    seen = []

    def error_seen(reply) -> ModelError:
        seen.append(reply)
        return error_of(reply)

    with pytest.raises(ModelError):
        raw.lanes().post_json(b"{}", error_seen)
    assert [(reply.status_code, reply.text) for reply in seen] == [(503, "busy é")]
