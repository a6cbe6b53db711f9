#!/usr/bin/env bash
# Make sure Debian's PgBouncer is installed for the PgBouncer test pass and bench/pgbouncer.py.
# Idempotent: does nothing when pgbouncer is on the PATH (or in /usr/sbin); never starts the
# packaged service (the tests and the bench start their own, on a free port).
set -euo pipefail
BIN="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
if [ -x "$BIN" ]; then
  echo "ensure_pgbouncer: $("$BIN" --version | head -1) is installed ($BIN)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure_pgbouncer: pgbouncer is missing and this user cannot run apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "ensure_pgbouncer: pgbouncer is missing: installing Debian's pgbouncer with apt-get"
$SUDO apt-get update
$SUDO apt-get install -y -o Dpkg::Progress-Fancy=0 pgbouncer
test -x /usr/sbin/pgbouncer
echo "ensure_pgbouncer: installed $(/usr/sbin/pgbouncer --version | head -1)"
