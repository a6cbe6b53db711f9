"""Real PostgreSQL sessions on the test database, beside Django's: a paused worker's, a listener."""
from __future__ import annotations

import psycopg
from django.db import connection


def pg_session(name: str = "", *, autocommit: bool = False) -> psycopg.Connection:
    """Open a session on the test database, named ``name`` (a worker's ``host:pid``) if given."""
    params = {k: v for k, v in connection.get_connection_params().items()
              if k in ("host", "port", "user", "password", "dbname")}
    if name:
        params["application_name"] = name
    return psycopg.connect(**params, autocommit=autocommit)
