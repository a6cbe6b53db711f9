"""The lease keeper's database connection: libpq through ctypes, not psycopg.

The keeper process (runs.engine.runtime.keeper_main) runs two statements a round. psycopg
would bring ~230 modules into it (asyncio, ssl, its adapters): ~20 MB of RSS in each keeper,
one beside every q2 worker process that runs slots (docs/workers.md "Memory"). This module
loads the libpq psycopg itself uses (the copy bundled in the psycopg-binary wheel, else the
system's, which psycopg's C and pure-Python builds need too) and calls the nine functions
the keeper needs. Statements use ``$1`` placeholders; parameters are sent and results read
as text. One statement at a time, in autocommit, never prepared by name: safe behind a
transaction pooler (runs.pooler), as the keeper's psycopg connection was.
"""
from __future__ import annotations

import ctypes
import glob
import importlib
import importlib.util
import os
from collections.abc import Sequence

_CONNECTION_OK = 0
_RESULT_OK = (1, 2)  # PGRES_COMMAND_OK, PGRES_TUPLES_OK
_VP, _CP, _INT = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_SIGNATURES = {  # name: (result type, argument types)
    "PQconnectdb": (_VP, [_CP]),
    "PQstatus": (_INT, [_VP]),
    "PQerrorMessage": (_CP, [_VP]),
    "PQfinish": (None, [_VP]),
    "PQexecParams": (_VP, [_VP, _CP, _INT, _VP, ctypes.POINTER(_CP), _VP, _VP, _INT]),
    "PQresultStatus": (_INT, [_VP]),
    "PQresultErrorMessage": (_CP, [_VP]),
    "PQntuples": (_INT, [_VP]),
    "PQnfields": (_INT, [_VP]),
    "PQgetvalue": (_CP, [_VP, _INT, _INT]),
    "PQclear": (None, [_VP]),
}


class PqError(Exception):
    """libpq could not connect, or a statement failed (the database is away or refused it)."""


def libpq_path() -> str:
    """Return the libpq to load: psycopg-binary's bundled copy if installed, else the system's."""
    spec = importlib.util.find_spec("psycopg_binary")  # found, not imported
    for package in (spec.submodule_search_locations or []) if spec else []:
        for pattern in ("../psycopg_binary.libs/libpq*.so*", ".dylibs/libpq*.dylib"):
            found = sorted(glob.glob(os.path.join(package, pattern)))
            if found:
                return found[0]
    # Imported only here: ctypes.util brings subprocess, shutil and tempfile along.
    system = importlib.import_module("ctypes.util").find_library("pq")
    if system is None:
        raise PqError("libpq not found: install psycopg[binary], or the system's libpq")
    return system


def _libpq() -> ctypes.CDLL:
    lib = ctypes.CDLL(libpq_path())
    for name, (result, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = result, args
    return lib


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", errors="replace").strip()


class PqConnection:
    """One libpq connection in autocommit; ``query`` runs a statement and returns its rows."""

    _lib: ctypes.CDLL | None = None  # loaded once per process, by the first connection

    def __init__(self, conninfo: str) -> None:
        if PqConnection._lib is None:
            PqConnection._lib = _libpq()
        self._pq = PqConnection._lib
        self._conn: int | None = self._pq.PQconnectdb(conninfo.encode())
        if self.closed:
            message = _text(self._pq.PQerrorMessage(self._conn)) if self._conn else "no memory"
            self.close()
            raise PqError(f"connection failed: {message}")

    @property
    def closed(self) -> bool:
        """True once closed or broken (libpq's status is then CONNECTION_BAD)."""
        return not self._conn or self._pq.PQstatus(self._conn) != _CONNECTION_OK

    def query(self, sql: str, params: Sequence[str]) -> list[tuple[str, ...]]:
        """Run ``sql`` with ``params`` ($1, $2, ... as text); return its rows as text."""
        if self.closed:
            raise PqError("the connection is closed")
        values = (_CP * len(params))(*(p.encode() for p in params))
        res = self._pq.PQexecParams(self._conn, sql.encode(), len(params), None, values,
                                    None, None, 0)
        if not res:
            raise PqError(_text(self._pq.PQerrorMessage(self._conn)))
        try:
            if self._pq.PQresultStatus(res) not in _RESULT_OK:
                raise PqError(_text(self._pq.PQresultErrorMessage(res)))
            fields = range(self._pq.PQnfields(res))
            return [tuple(self._pq.PQgetvalue(res, row, col).decode() for col in fields)
                    for row in range(self._pq.PQntuples(res))]
        finally:
            self._pq.PQclear(res)

    def close(self) -> None:
        if self._conn:
            self._pq.PQfinish(self._conn)
        self._conn = None
