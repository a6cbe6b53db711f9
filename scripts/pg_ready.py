"""Exit 0 when the PostgreSQL at the given URL answers, 1 otherwise (used by the Makefile)."""
import sys

import psycopg

url = sys.argv[1].replace("postgres://", "postgresql://", 1)
# Connect to the maintenance database: the test database need not exist yet.
base = url.rsplit("/", 1)[0] + "/postgres"
try:
    with psycopg.connect(base, connect_timeout=3) as conn:
        conn.execute("select 1")
except psycopg.Error as exc:
    print(f"PostgreSQL check failed: {exc}", file=sys.stderr)
    sys.exit(1)
