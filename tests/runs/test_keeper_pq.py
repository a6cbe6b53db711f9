"""The lease keeper's libpq connection (ctypes) against the real test database.

It sends ``$n`` parameters as text and reads rows as text; a failed statement raises PqError
and leaves the connection usable; a server that does not answer raises PqError at connect.
"""
from __future__ import annotations

import os
import socket

import psycopg
import pytest

from runs.engine.runtime.keeper import keeper_dsn
from runs.engine.runtime.keeper_pq import PqConnection, PqError, libpq_path

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_statement_takes_text_parameters_and_returns_text_rows():
    conn = PqConnection(keeper_dsn())
    try:
        rows = conn.query("SELECT x::text, $2 || 'y' FROM unnest($1::uuid[]) AS x ORDER BY x",
                          ["{00000000-0000-0000-0000-000000000002,"
                           "00000000-0000-0000-0000-000000000001}", "x"])
        assert rows == [("00000000-0000-0000-0000-000000000001", "xy"),
                        ("00000000-0000-0000-0000-000000000002", "xy")]
        assert conn.query("SELECT 1 WHERE false", []) == []
    finally:
        conn.close()
    assert conn.closed


def test_a_failed_statement_raises_and_the_connection_goes_on():
    conn = PqConnection(keeper_dsn())
    try:
        with pytest.raises(PqError, match="uuid"):
            conn.query("SELECT $1::uuid", ["not-a-uuid"])
        assert not conn.closed
        assert conn.query("SELECT $1::int + 1", ["41"]) == [("42",)]
    finally:
        conn.close()


def test_a_server_that_is_not_there_raises_at_connect():
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PqError, match="connection failed"):
        PqConnection(f"host=127.0.0.1 port={port} user=nobody dbname=none connect_timeout=2")


def test_with_psycopg_binary_it_loads_the_libpq_that_psycopg_uses():
    if psycopg.pq.__impl__ != "binary":
        pytest.skip(f"psycopg's {psycopg.pq.__impl__} build uses the system's libpq")
    path = libpq_path()
    assert "psycopg_binary" in path and os.path.isfile(path), path
