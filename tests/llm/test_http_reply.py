"""reply_read (agentops.llm.http_reply): one HTTP/1.1 answer read off a real socket pair.

The far end writes raw bytes (all at once, or one byte at a time from a thread), then
closes or not; the answer read, or the error raised, is what a model call would see.
"""
from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from agentops.llm.http_reply import GarbledReply, RawReply, reply_read


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected (client, server) socket pair."""
    client, server = socket.socketpair()
    yield client, server
    client.close()
    server.close()


def read(pair: tuple[socket.socket, socket.socket], wire: bytes, *, close: bool = True,
         trickle: bool = False, timeout_s: float = 2.0) -> RawReply:
    """Write ``wire`` from the server end (closing it after when ``close``); read the answer."""
    client, server = pair

    def write() -> None:
        for i in range(len(wire)) if trickle else [None]:
            server.sendall(wire if i is None else wire[i:i + 1])
        if close:
            server.shutdown(socket.SHUT_WR)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        return reply_read(client, time.monotonic() + timeout_s)
    finally:
        writer.join()


def test_a_content_length_answer_on_a_kept_connection(pair) -> None:
    reply = read(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX-Request-Id: a1\r\n\r\n"
                       b'{"a":1}', close=False)
    assert (reply.status, reply.body, reply.will_close) == (200, b'{"a":1}', False)
    assert reply.headers.get("x-request-id") == reply.headers.get("X-REQUEST-ID") == "a1"


def test_bytes_past_the_answer_close_the_connection(pair) -> None:
    reply = read(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}EXTRA",
                 close=False)
    assert (reply.body, reply.will_close) == (b'{"a":1}', True)


def test_an_answer_read_one_byte_at_a_time_is_the_same(pair) -> None:
    wire = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"5;ext=1\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\nx-trailer: t\r\n\r\n")
    reply = read(pair, wire, close=False, trickle=True)
    assert (reply.body, reply.will_close) == (b'{"a": 1}', False)


def test_headers_repeated_and_folded(pair) -> None:
    reply = read(pair, b"HTTP/1.1 429 Too Many\r\nretry-after: 7\r\nRetry-After: 9\r\n"
                       b"x-long: one\r\n  two\r\ncontent-length: 0\r\n\r\n")
    assert reply.headers.get("retry-after") == "7"  # the first, as email's Message.get
    assert reply.headers.get("x-long") == "one two"
    assert reply.status == 429 and reply.body == b""


def test_the_content_type_charset(pair) -> None:
    reply = read(pair, b'HTTP/1.1 400 Bad\r\nContent-Type: text/plain; Charset="Latin-1"\r\n'
                       b"content-length: 0\r\n\r\n")
    assert reply.headers.content_charset() == "latin-1"


def test_no_content_length_reads_up_to_the_close(pair) -> None:
    reply = read(pair, b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{\"ok\": 1}")
    assert (reply.body, reply.will_close) == (b'{"ok": 1}', True)


def test_http_1_0_closes_unless_it_says_keep_alive(pair) -> None:
    reply = read(pair, b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}")
    assert reply.will_close is True


def test_an_interim_100_continue_is_skipped(pair) -> None:
    reply = read(pair, b"HTTP/1.1 100 Continue\r\n\r\n"
                       b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}", close=False)
    assert (reply.status, reply.body) == (201, b"{}")


def test_a_body_cut_before_its_length_is_incomplete(pair) -> None:
    with pytest.raises(http.client.IncompleteRead):
        read(pair, b"HTTP/1.1 200 OK\r\ncontent-length: 200\r\n\r\n{\"choices\": [")


def test_a_chunked_body_cut_before_its_last_chunk_is_incomplete(pair) -> None:
    with pytest.raises(http.client.IncompleteRead):
        read(pair, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\n{\"choices\"")


def test_a_chunk_size_that_is_not_hex_is_an_error(pair) -> None:
    with pytest.raises(ValueError):
        read(pair, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")


def test_a_chunk_longer_than_its_size_is_an_error(pair) -> None:
    with pytest.raises(GarbledReply, match="longer than its size"):
        read(pair, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n")


def test_a_head_cut_midway_is_incomplete(pair) -> None:
    with pytest.raises(http.client.IncompleteRead):
        read(pair, b"HTTP/1.1 200 OK\r\ncontent-len")


def test_no_answer_at_all_is_remote_disconnected(pair) -> None:
    with pytest.raises(http.client.RemoteDisconnected):
        read(pair, b"")


@pytest.mark.parametrize("line", [b"HTTP/2 200 OK", b"ICY 200 OK", b"HTTP/1.1 20 OK",
                                  b"HTTP/1.1 abc OK", b"<html>"])
def test_a_bad_status_line_is_an_error(pair, line: bytes) -> None:
    with pytest.raises(http.client.BadStatusLine):
        read(pair, line + b"\r\ncontent-length: 0\r\n\r\n")


@pytest.mark.parametrize("head", [b"x-no-colon\r\n", b"content-length: -3\r\n",
                                  b"content-length: 12abc\r\n", b"x-big: " + b"a" * 70000 + b"\r\n"])
def test_bad_headers_are_an_error(pair, head: bytes) -> None:
    with pytest.raises(GarbledReply):
        read(pair, b"HTTP/1.1 200 OK\r\n" + head + b"\r\n{}")


def test_a_silent_server_times_out_at_the_deadline(pair) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        read(pair, b"HTTP/1.1 200 OK\r\n", close=False, timeout_s=0.3)
    assert time.monotonic() - started < 1.0
