#!/usr/bin/env bash
# Make sure Debian's Chromium (and its driver) is installed for the browser tests.
# Idempotent: does nothing when /usr/bin/chromium exists; never downloads a browser elsewhere.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure_chromium: /usr/bin/chromium is missing and this user cannot run apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver
test -x /usr/bin/chromium
